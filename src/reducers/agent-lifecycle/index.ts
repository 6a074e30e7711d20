export { AgentLifecycleEvent, AgentLifecycleInput, AgentLifecyclePayloads, AgentLifecycleState, AgentStats, AgentLifecycleStateName } from './schema.js';
export { agentLifecycle } from './machine.js';
