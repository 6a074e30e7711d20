export { ModelCallRequest, RecordedInput, ToolResultSummary, TurnEngineEvent, TurnEngineInput, TurnEnginePayloads, TurnEngineState, TurnEngineStateName } from './schema.js';
export { STEERED, turnEngine } from './machine.js';
