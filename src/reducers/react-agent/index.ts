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
export {
  AgentInput,
  ReActObservation,
  agentEventSchema,
  type AddToolCallsToContextInput,
  type ExpandContextWindowInput,
  type LlmChunkInput,
  type LlmMessageCompleteInput,
  type ToolCallResultInput,
  type ToolCallStartedInput,
  type UserMessageInput,
} from './input.js';
export { initialAgentState } from './initial.js';
export { agentTransition, type AgentTransitionOptions } from './transition.js';
export { ReactAgentEffect, reactAgentEffectsAt } from './effects.js';
export { reactAgent, type AgentInputRow } from './machine.js';
