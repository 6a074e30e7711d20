export { defineTool, type AnyTool, type DefineToolOptions, type Tool, type ToolExecutionContext, type ToolInputCheck } from './tool.js';
export { toolSpecs } from './tool-specs.js';
export { toolCallEffects, type ToolCallEffectsOptions } from './tool-call-effects.js';
export { approvalDecision } from './tool-call-policy.js';
export { toolRegistry, type ResolvedCall, type ToolRegistry } from './tool-registry.js';
export { toJsonOutput, NonJsonOutputError, type JsonValue } from './json-output.js';
export { ToolAbortError, ToolTimeoutError, runTool } from './run-tool.js';
export { connectMcp, type ConnectMcpOptions, type McpArguments, type McpConnection, type McpToolInfo } from './connect-mcp.js';
