import { forkJoin, lastValueFrom, map, type Observable } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import type { AgentLifecycleState } from '../../reducers/agent-lifecycle/schema.js';
import { conversation } from '../../reducers/conversation/machine.js';
import type { ConversationState } from '../../reducers/conversation/schema.js';
import type { AgentStreams } from '../../reducers/stream-ids.js';
import { NO_USAGE, addUsage, type Usage } from '../../reducers/budget.js';
import type { EpicContext } from '../../streams/epic.js';
import { agentLimits, budgetRefusal, conversationLimits, type BudgetLimits } from './agent-budgets.js';
import { conversationUsageNow$, reactTurnUsageNow } from './conversation-usage.js';

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

/**
 * Why no turn of an agent may start now: {@link turnRefusal}, else its budgets' (`budgetRefusal`
 * with `limits`), the conversation's usage being `talkUsed` (its agents' durable usage summed,
 * `conversationUsage$`; `undefined`: not checked) plus `ended`, what a turn ending in this same
 * step used (it reaches the agent only with that step's commands, and the suspension after). So a turn is refused once a budget
 * is used up, even before the suspension lands. Synchronous: a step decided in the frame that asked.
 */
export function turnStartRefusal(
  talk: ConversationState | undefined,
  lifecycle: AgentLifecycleState | undefined,
  limits: BudgetLimits | undefined,
  talkUsed: Usage | undefined,
  ended: Usage = NO_USAGE,
): string | undefined {
  const refusal = turnRefusal(talk, lifecycle);
  if (refusal !== undefined || limits === undefined) return refusal;
  const agentNow = lifecycle === undefined ? undefined : { ...lifecycle, usage: addUsage(lifecycle.usage, ended) };
  return budgetRefusal(agentNow, talk, limits, talkUsed === undefined ? undefined : addUsage(talkUsed, ended));
}

/**
 * {@link turnStartRefusal} of `agent` now, the conversation's usage counting its running turns
 * ({@link conversationUsageNow$}: their answered calls are theirs until they end), and the agent's
 * its own running ReAct turn (a model call made again after a restart: the rounds answered before
 * it, {@link reactTurnUsageNow}), both with `pending` added: what a call of the agent used that
 * its log does not hold durably yet (an empty answer a chain would fall over from). Asked by
 * `agentTurns` when a turn starts and by `reactAgentLoop` before each model call.
 */
export async function turnStartRefusal$(
  agent: AgentStreams,
  talk: ConversationState | undefined,
  lifecycle: AgentLifecycleState | undefined,
  context: EpicContext,
  limits: BudgetLimits | undefined,
  pending: Usage = NO_USAGE,
): Promise<string | undefined> {
  if (turnRefusal(talk, lifecycle) !== undefined || limits === undefined || talk === undefined) return turnStartRefusal(talk, lifecycle, limits, undefined);
  // Only what a limit is set on is read: the conversation's usage now lists its streams, every turn.
  const shared = conversationLimits(talk, limits) !== undefined;
  const own = lifecycle !== undefined && agentLimits(lifecycle, limits) !== undefined;
  if (!shared && !own) return undefined;
  const [talkUsed, running] = await Promise.all([
    shared ? lastValueFrom(conversationUsageNow$(agent.root, context)) : undefined,
    own ? reactTurnUsageNow(agent, context) : NO_USAGE,
  ]);
  const agentNow = lifecycle === undefined ? undefined : { ...lifecycle, usage: addUsage(lifecycle.usage, running) };
  return turnStartRefusal(talk, agentNow, limits, talkUsed, pending);
}
