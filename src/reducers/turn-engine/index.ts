export { ToolResultSummary, TurnEngineEvent, TurnEngineInput, TurnEnginePayloads, TurnEngineState, TurnEngineStateName } from './schema.js';
export { turnEngine } from './machine.js';
