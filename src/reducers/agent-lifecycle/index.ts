export { AgentStats, AgentLifecycleEvent, AgentLifecycleInput, AgentLifecycleState, AgentLifecycleStateName } from './schema.js';
export { agentLifecycle } from './machine.js';
