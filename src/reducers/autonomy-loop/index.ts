export { AutonomyLoopEvent, AutonomyLoopInput, AutonomyLoopPayloads, AutonomyLoopState, AutonomyLoopStateName } from './schema.js';
export { autonomyLoop } from './machine.js';
