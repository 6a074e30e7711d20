/**
 * runestream: an RxJS stream-first engine for AI-agent state machines.
 * Everything public is exported from here.
 */
export * from './reducers/index.js';
export * from './streams/index.js';
export * from './effects/index.js';
export * from './server/index.js';
