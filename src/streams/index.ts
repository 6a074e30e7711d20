export * from './reduce-with.js';
export * from './moorex.js';
export * from './store.js';
export * from './memory-store.js';
export * from './engine.js';
export * from './epic.js';
export * from './timer-wheel.js';
export * from './sqlite-store.js';
