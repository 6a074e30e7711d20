export { AgentRegistrationEvent, AgentRegistrationState, AgentRegistrationStateName } from './schema.js';
export { agentRegistration } from './machine.js';
