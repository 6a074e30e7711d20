export * from './chat-actor-lifecycle.js';
export * from './tool-call-recovery.js';
export * from './llm/index.js';
export * from './tools/index.js';
export * from './agent/index.js';
