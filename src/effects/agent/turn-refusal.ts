import { forkJoin, map, type Observable } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import type { AgentLifecycleState } from '../../reducers/agent-lifecycle/schema.js';
import { conversation } from '../../reducers/conversation/machine.js';
import type { ConversationState } from '../../reducers/conversation/schema.js';
import type { AgentStreams } from '../../reducers/stream-ids.js';
import type { EpicContext } from '../../streams/epic.js';

/**
 * Why no turn of an agent may start now, from the durable states of its conversation (`talk`)
 * and its lifecycle, or `undefined` if one may: the conversation is paused, suspended (its reason
 * said: a budget exhausted) or closing, or the agent is terminated or failed (its reason said).
 * Asked for every kind of agent: a turn-based agent's turn that starts (`agentTurns`), a ReAct
 * agent's model call (`reactAgentEpics`). The budgets' own check is `budgetRefusal`.
 */
export function turnRefusal(talk: ConversationState | undefined, lifecycle: AgentLifecycleState | undefined): string | undefined {
  // `created`: its `agent_ready`, dispatched when the agent was spawned, is ahead in its queue.
  if (talk !== undefined && talk.value !== 'active' && talk.value !== 'created') {
    return `the conversation is ${talk.value}${talk.value === 'suspended' && talk.reason !== undefined ? `: ${talk.reason}` : ''}`;
  }
  if (lifecycle !== undefined && agentLifecycle.terminal.includes(lifecycle.value)) {
    // A failed agent says why it failed (its init error: a role with no profile, or not ACTIVE).
    const why = lifecycle.reason ?? lifecycle.error;
    return `the agent is ${lifecycle.value}${why === undefined ? '' : `: ${why}`}`;
  }
  return undefined;
}

/**
 * {@link turnRefusal} of `agent` now, from its conversation's and lifecycle's durable states: an
 * Observable (of one value, then complete), so a context that answers at once (a test's) decides
 * in the frame that asked.
 */
export const turnRefusal$ = (agent: AgentStreams, context: EpicContext): Observable<string | undefined> =>
  forkJoin([context.snapshot(agent.root, conversation), context.snapshot(agent.lifecycle, agentLifecycle)]).pipe(
    map(([talk, lifecycle]) => turnRefusal(talk?.state, lifecycle?.state)),
  );
