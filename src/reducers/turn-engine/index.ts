export { TurnEngineEvent, TurnEngineState, TurnEngineStateName } from './schema.js';
export { turnEngine } from './machine.js';
