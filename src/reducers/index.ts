export * from './machine.js';
export * from './table.js';
export * from './mermaid.js';
export * from './validate.js';
export * from './chat-actor/index.js';
