export { ToolCallEvent, ToolCallInput, ToolCallPayloads, ToolCallState, ToolCallStateName, ToolCallStatus } from './schema.js';
export { toolCall, toolCallStatus } from './machine.js';
