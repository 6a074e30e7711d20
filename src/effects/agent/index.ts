/** Agents: turn-based (seed 003) on the engine, and ReAct (seed 004) on createMoorex. */
export { agentStreams, agentOfTurn, agentOfCall, type AgentStreams } from './streams.js';
export { transcriptOf, toolResultOutput } from './transcript.js';
export { agentModel, type AgentModelOptions, type ModelCaller } from './agent-model.js';
export { agentTurns } from './agent-turns.js';
export { agentEpics, type AgentEpicsOptions } from './agent-epics.js';
export { reactAgentRuntime, reactAgentMessages, type ReactAgentRuntime, type ReactAgentRuntimeOptions } from './react-agent-runtime.js';
