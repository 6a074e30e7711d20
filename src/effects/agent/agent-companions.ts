import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import type { AgentLifecycleState } from '../../reducers/agent-lifecycle/schema.js';
import { conversation } from '../../reducers/conversation/machine.js';
import { parseStreamId, type AgentStreams } from '../../reducers/stream-ids.js';
import type { EpicCommand, EpicContext } from '../../streams/epic.js';
import { stateOf } from './state-of.js';

/**
 * Why an agent of `role` (`undefined`: an agent spawned without one) may not start now, or
 * `undefined` when it may: the agent registry's answer (see `registeredAgentAdmission`).
 */
export type AgentAdmission = (role: string | undefined, context: EpicContext) => Promise<string | undefined>;

/**
 * An agent's companion streams, created with the stream that runs it (its turn stream, or its
 * ReAct stream), ready at once: its lifecycle, and its conversation if it is the first agent
 * there (the conversation's root agent). A lifecycle spawned before (with a role, a parent) is
 * kept. `initError` says why an agent cannot start (its role has no profile), from its lifecycle
 * (as spawned, or a fresh one's): it then gets `init_error` instead of `init_complete`. So does an
 * agent whose role `admission` refuses (its registration is not ACTIVE).
 */
export async function agentCompanions(
  agent: AgentStreams,
  context: EpicContext,
  initError?: (lifecycle: AgentLifecycleState) => string | undefined,
  admission?: AgentAdmission,
): Promise<EpicCommand[]> {
  const lifecycle = initError === undefined && admission === undefined ? undefined : await stateOf(context, agent.lifecycle, agentLifecycle);
  const spawned = lifecycle ?? agentLifecycle.initial({ agentId: agent.agentId });
  // Admission first: it waits (bounded) for the profile of a registration that is ACTIVE.
  const error = (await admission?.(spawned.role, context)) ?? initError?.(spawned);
  const commands: EpicCommand[] = [
    { stream: agent.lifecycle, spawn: agentLifecycle.id, input: { agentId: agent.agentId } },
    { stream: agent.lifecycle, event: error === undefined ? { type: 'init_complete' } : { type: 'init_error', error } },
  ];
  if ((await stateOf(context, agent.root, conversation)) !== undefined) return commands;
  const conversationId = parseStreamId(agent.root)!.id;
  return [
    { stream: agent.root, spawn: conversation.id, input: { conversationId } },
    ...commands,
    { stream: agent.root, event: { type: 'agent_ready', rootAgentId: agent.agentId } },
  ];
}
