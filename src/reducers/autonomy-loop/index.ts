export { AutonomyLoopEvent, AutonomyLoopInput, AutonomyLoopState, AutonomyLoopStateName } from './schema.js';
export { autonomyLoop } from './machine.js';
