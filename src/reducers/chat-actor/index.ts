export * from './schema.js';
export * from './machine.js';
