export { ToolCallEvent, ToolCallInput, ToolCallState, ToolCallStateName, ToolCallStatus } from './schema.js';
export { toolCall, toolCallStatus } from './machine.js';
