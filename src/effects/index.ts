export * from './chat-actor-lifecycle.js';
