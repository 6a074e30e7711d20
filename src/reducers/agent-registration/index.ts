export { AgentRegistrationEvent, AgentRegistrationInput, AgentRegistrationState, AgentRegistrationStateName } from './schema.js';
export { AgentDefinition, MAX_AGENT_MCP_SERVERS, agentDefinitionStream, agentNameOf } from './definition.js';
export { AUTO_PAUSE_REASONS, agentRegistration } from './machine.js';
