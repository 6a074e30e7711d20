import { defer, filter, ignoreElements, lastValueFrom, merge, mergeMap, tap, type Observable } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import { NO_USAGE, type Usage } from '../../reducers/budget.js';
import { conversation } from '../../reducers/conversation/machine.js';
import { reactAgentEffectsAt } from '../../reducers/react-agent/effects.js';
import { reactAgent } from '../../reducers/react-agent/machine.js';
import type { AgentState } from '../../reducers/react-agent/state.js';
import { SPAWN_EVENT_TYPE, type Rune } from '../../reducers/rune.js';
import type { AgentStreams } from '../../reducers/stream-ids.js';
import { concatMapByKey } from '../../streams/concat-map-by-key.js';
import type { Epic, EpicCommand, EpicContext } from '../../streams/epic.js';
import { agentCompanions, type AgentAdmission } from './agent-companions.js';
import { conversationLimits, type BudgetLimits } from './agent-budgets.js';
import { conversationUsage$ } from './conversation-usage.js';
import { stateOf } from './state-of.js';
import { agentOfReact } from './streams.js';
import { turnStartRefusal } from './turn-refusal.js';
import { reactTurnId, reactTurnUsageAt } from './turn-usage.js';

/** The lifecycle step a ReAct agent's last command will bring about: its state, and the turn it runs. */
interface Step {
  readonly value: 'idle' | 'running_turn';
  readonly turnId?: string | undefined;
}

/** Whether a ReAct state has a model call owed or under way (an answer streaming): a turn of its agent. */
const calling = (state: AgentState): boolean =>
  Object.values(reactAgentEffectsAt(state)).some((effect) => effect.type === 'call-llm') ||
  state.messages.some((message) => message.role === 'assistant' && message.streaming);

/**
 * The lifecycle steps a ReAct agent's state calls for. Each model call of its loop is a turn of
 * the agent, as a turn-based agent's turn: it starts when the call is due, unless the agent may
 * not run one (`turnRefusal`: the loop then ends unanswered, see `reactAgentLoop`), and ends with
 * the call's observation, with what the call used (`reactTurnUsageAt`) for the agent's and the
 * conversation's budgets. A call due right after
 * another is a turn of its own. Decided from the durable states alone, so it is the same after a restart.
 */
async function reconciled(agent: AgentStreams, rune: Rune, context: EpicContext, pending: Map<string, Step>, limits: BudgetLimits | undefined): Promise<EpicCommand[]> {
  const [state, lifecycle, talk] = await Promise.all([
    stateOf(context, agent.react, reactAgent),
    stateOf(context, agent.lifecycle, agentLifecycle),
    stateOf(context, agent.root, conversation),
  ]);
  if (state === undefined || lifecycle === undefined) return [];
  // The conversation's usage (its agents', summed): read only when it has a limit, as a listing of its agents.
  const talkUsed =
    limits !== undefined && talk !== undefined && conversationLimits(talk, limits) !== undefined ? await lastValueFrom(conversationUsage$(agent.root, context)) : undefined;
  if (agentLifecycle.terminal.includes(lifecycle.value)) {
    pending.delete(agent.lifecycle); // terminated (its conversation closed, its budget exhausted) or failed: it runs no turn
    return [];
  }
  const busy = calling(state as AgentState);
  // A step sent and not yet applied counts as done: the lifecycle's durable state lags it.
  const before: Step = pending.get(agent.lifecycle) ?? (lifecycle.value === 'running_turn' ? { value: 'running_turn', turnId: lifecycle.turnId } : { value: 'idle' });
  let step = before;
  const commands: EpicCommand[] = [];
  // What a turn ended here used: not yet in the agent's or the conversation's usage read above.
  let ended: Usage = NO_USAGE;
  if (step.value === 'running_turn' && (!busy || rune.event.type === 're-act-observed')) {
    ended = await reactTurnUsageAt(agent.react, step.turnId, rune.at, context);
    commands.push({ stream: agent.lifecycle, event: { type: 'turn_completed', usage: ended } });
    // The conversation hears only what changes its errors in a row: a completed turn clears them.
    if (talk?.consecutiveErrors !== undefined) commands.push({ stream: agent.root, event: { type: 'turn_completed' } });
    step = { value: 'idle' };
  }
  // Decided in this same step (no await), so the turn is assigned before its call can answer.
  if (step.value === 'idle' && busy && turnStartRefusal(talk, lifecycle, limits, talkUsed, ended) === undefined) {
    const turnId = reactTurnId(rune.seq);
    commands.push({ stream: agent.lifecycle, event: { type: 'turn_assigned', turnId } });
    step = { value: 'running_turn', turnId };
  }
  if (step !== before) pending.set(agent.lifecycle, step);
  return commands;
}

/**
 * Gives every ReAct agent (seed 004) the seed-003 companions a turn-based agent has, so a
 * conversation sees both kinds alike:
 *
 * 1. Its ReAct stream spawned: its `agentLifecycle` stream (ready at once) and, if none is there
 *    yet, its conversation, with it as the root agent.
 * 2. Each model call of a ReAct loop is a turn: when a call is due (a user message or the loop's
 *    tool results to respond to) the agent runs a turn (`turn_assigned`); when the call's
 *    observation lands the turn completes, with the call's usage (`turn_completed { usage }`, as
 *    a turn-based agent's turn ends), which the agent's and the conversation's budgets count
 *    (`agentBudgets`). The loop's tool calls run between turns.
 *
 * Part of `reactAgentEpics`. No turn starts while the agent may not run one (`turnRefusal`: its
 * conversation suspended, paused or closing, or the agent terminated); the loop then ends
 * unanswered without calling the model (see `reactAgentLoop`). With
 * `admission`, an agent whose role it refuses gets `init_error` saying why instead of starting.
 */
export function reactAgentLifecycle(admission?: AgentAdmission, limits?: BudgetLimits): Epic {
  return function reactAgentLifecycle(runes$, context) {
    // Per lifecycle stream, the state its last step sent will put it in, until its rune says so.
    const pending = new Map<string, Step>();
    const onRune = (rune: Rune): Observable<EpicCommand> => {
      const agent = agentOfReact(rune.stream)!;
      const step =
        rune.event.type === SPAWN_EVENT_TYPE ? () => agentCompanions(agent, context, undefined, admission) : () => reconciled(agent, rune, context, pending, limits);
      return defer(step).pipe(mergeMap((commands) => commands));
    };
    // Per agent, one rune at a time, so its lifecycle steps keep their order; agents side by side,
    // and an agent with nothing to do holds nothing here.
    const applied$ = runes$.pipe(
      filter((rune) => {
        const step = pending.get(rune.stream);
        // The step is applied when its rune lands: a turn's assignment by its own turn id.
        if (rune.machine !== agentLifecycle.id || step === undefined || step.value !== rune.to) return false;
        return step.value === 'idle' || (rune.event as { turnId?: string }).turnId === step.turnId;
      }),
      tap((rune) => pending.delete(rune.stream)),
      ignoreElements(),
    );
    const steps$ = runes$.pipe(
      filter((rune) => rune.machine === reactAgent.id && agentOfReact(rune.stream) !== undefined),
      concatMapByKey((rune) => rune.stream, onRune),
    );
    return merge(applied$, steps$);
  };
}
