export * from './reduce-with.js';
export * from './moorex.js';
