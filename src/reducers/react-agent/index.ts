export {
  AgentMessage,
  AgentState,
  ReActContext,
  ToolCallRecord,
  ToolCallResult,
  ToolDefinition,
  agentStateSchema,
  reActContextSchema,
  toolCallRecordSchema,
  toolDefinitionSchema,
} from './state.js';
export { AgentInput, agentEventSchema } from './input.js';
export { initialAgentState } from './initial.js';
export { agentTransition, type AgentTransitionOptions } from './transition.js';
export { ReactAgentEffect, reactAgentEffectsAt } from './effects.js';
export { reactAgent, type AgentInputRow } from './machine.js';
