export { AgentRegistrationEvent, AgentRegistrationInput, AgentRegistrationState, AgentRegistrationStateName } from './schema.js';
export {
  AgentDefinition,
  ClientTool,
  MAX_AGENT_MCP_SERVERS,
  MAX_CLIENT_TOOLS,
  MAX_TOOL_SCHEMA_BYTES,
  ToolInputSchema,
  agentDefinitionStream,
  agentNameOf,
} from './definition.js';
export { AUTO_PAUSE_REASONS, agentRegistration, declaredAgentRegistration } from './machine.js';
export { mcpServerOf, undeclaredMcpServer, type DeclaredMcpServers, type UndeclaredMcpServer } from './mcp-servers.js';
