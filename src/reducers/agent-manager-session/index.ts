export {
  AgentManagerSessionEvent,
  AgentManagerSessionInput,
  AgentManagerSessionState,
  AgentManagerSessionStateName,
} from './schema.js';
export { agentManagerSession } from './machine.js';
export { agentManagerUiFlags, type AgentManagerUiFlags } from './ui-flags.js';
export { AgentManagerPersistedSession, reconstructAgentManagerState } from './reconstruct.js';
export { AgentManagerCliMessage, fromCliMessage, type AgentManagerCliMapping } from './cli-message.js';
