import { z } from 'zod';
import { EMPTY, type Observable, defer, firstValueFrom, forkJoin, from, lastValueFrom, map, merge, mergeMap, of, switchMap } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import type { AgentLifecycleState } from '../../reducers/agent-lifecycle/schema.js';
import { Budget, NO_USAGE, addUsage, budgetOverrun, describeOverrun, type BudgetOverrun, type Usage } from '../../reducers/budget.js';
import { conversation } from '../../reducers/conversation/machine.js';
import type { ConversationState } from '../../reducers/conversation/schema.js';
import type { AgentStreams } from '../../reducers/stream-ids.js';
import { TURN_PROGRESS, turnEngine } from '../../reducers/turn-engine/machine.js';
import { durableDeadline } from '../../streams/durable-deadline.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand, EpicContext } from '../../streams/epic.js';
import type { EffectsByKey } from '../../streams/state-effects.js';
import type { Rune } from '../../reducers/rune.js';
import { concatMapByKey } from '../../streams/concat-map-by-key.js';
import { agentOfLifecycle, agentOfTurn } from './streams.js';
import { conversationUsage$, conversationUsageNow$ } from './conversation-usage.js';
import { keepNewest } from './keep-newest.js';
import { turnStartedAt } from './turn-usage.js';
import { stateOf } from './state-of.js';

/** The limits {@link agentBudgets} enforces (see `agentEpics`). */
export interface BudgetLimits {
  /** Limits on each agent: what its turns used, summed. Default: none. */
  readonly budget?: Budget;
  /**
   * Limits on each agent of a role (the `role` of its `agent.spawning`), in place of `budget`:
   * an `AgentProfile`'s budget. Or a function of the role, for roles that come and go (the agent
   * registry's). Default: none.
   */
  readonly budgetsByRole?: Readonly<Record<string, Budget | undefined>> | ((role: string) => Budget | undefined);
  /**
   * Limits on each conversation: what the turns of all its agents used, summed. A
   * `budget_replenished` that carries a `budget` replaces them for that conversation. Default: none.
   */
  readonly conversationBudget?: Budget;
}

/** The limits on an agent: its role's, else the default. */
export const agentLimits = (lifecycle: AgentLifecycleState, limits: BudgetLimits): Budget | undefined =>
  (lifecycle.role === undefined ? undefined : roleBudget(limits, lifecycle.role)) ?? limits.budget;

/** A role's own limits, if it has any. */
const roleBudget = ({ budgetsByRole }: BudgetLimits, role: string): Budget | undefined =>
  typeof budgetsByRole === 'function' ? budgetsByRole(role) : Object.hasOwn(budgetsByRole ?? {}, role) ? budgetsByRole![role] : undefined;

/** The limits a conversation has now: those its last replenish set, else the configured ones. */
export const conversationLimits = (talk: ConversationState | undefined, limits: BudgetLimits): Budget | undefined => talk?.budget ?? limits.conversationBudget;

const agentReason = (overrun: BudgetOverrun): string => `agent budget exhausted: ${describeOverrun(overrun)}`;
const conversationReason = (overrun: BudgetOverrun): string => `conversation budget exhausted: ${describeOverrun(overrun)}`;

/** The conversation's `budget_exhausted`: the reason, and the overrun with the usage (its agents', summed) and limits as its `budgetInfo`. */
const suspend = (root: string, used: Usage, budget: Budget, overrun: BudgetOverrun): EpicCommand => ({
  stream: root,
  event: { type: 'budget_exhausted', reason: conversationReason(overrun), budgetInfo: { ...overrun, usage: used, budget } },
});

/**
 * Why a turn may not start for an agent, or `undefined` if it may: its own usage (`lifecycle`),
 * or its conversation's (`talkUsed`: its agents' summed, `conversationUsage$`; `agentTurns` passes
 * {@link conversationUsageNow$}, its running turns counted; `undefined`: not checked), has reached a limit. Asked by
 * `agentTurns` when a turn starts; the turn is then interrupted with this reason, and
 * {@link agentBudgets} terminates the agent (suspends the conversation).
 */
export function budgetRefusal(
  lifecycle: AgentLifecycleState | undefined,
  talk: ConversationState | undefined,
  limits: BudgetLimits,
  talkUsed: Usage | undefined,
): string | undefined {
  const own = lifecycle === undefined ? undefined : budgetOverrun(lifecycle.usage, agentLimits(lifecycle, limits));
  if (own !== undefined) return agentReason(own);
  const shared = talk === undefined || talkUsed === undefined ? undefined : budgetOverrun(talkUsed, conversationLimits(talk, limits));
  return shared === undefined ? undefined : conversationReason(shared);
}

/** Usage a turn has taken in the rune at `seq`, which may not be durable yet. */
export interface PendingUsage {
  readonly usage: Usage;
  readonly seq: number;
}

/**
 * Why the running turn of `agent` may not call the model again, or `undefined` if it may: another
 * call would go past a limit of its agent (its usage with the turn's so far) or of its
 * conversation (its usage with every running turn's so far, see {@link conversationUsageNow$}:
 * the calls other agents' turns have had answered count before those turns end). Tool calls may
 * be used up, not passed: the results of the round that used them up still go to the model.
 * Asked when a turn enters its tool round ({@link agentBudgets}), when the round ends (`agentModel`,
 * before the call) and before a provider chain falls over from an empty answer, that answer as
 * `pending`: counted unless the turn's durable state has it already. An Observable of one value,
 * as `turnRefusal$`.
 */
export function callRefusal$(agent: AgentStreams, context: EpicContext, limits: BudgetLimits, pending?: PendingUsage): Observable<string | undefined> {
  return forkJoin([context.snapshot(agent.turn, turnEngine), context.snapshot(agent.lifecycle, agentLifecycle), context.snapshot(agent.root, conversation)]).pipe(
    switchMap(([turn, lifecycle, talk]) => {
      const notDurable = pending !== undefined && (turn?.seq ?? 0) < pending.seq ? pending.usage : NO_USAGE;
      const turnUsage = addUsage(turn?.state.turnUsage ?? NO_USAGE, notDurable);
      const own = lifecycle === undefined ? undefined : budgetOverrun(addUsage(lifecycle.state.usage, turnUsage), agentLimits(lifecycle.state, limits), ['toolCalls']);
      if (own !== undefined) return of(agentReason(own));
      const budget = talk === undefined ? undefined : conversationLimits(talk.state, limits);
      if (talk === undefined || budget === undefined) return of(undefined);
      return conversationUsageNow$(agent.root, context).pipe(
        map((used) => {
          const shared = budgetOverrun(addUsage(used, notDurable), budget, ['toolCalls']);
          return shared === undefined ? undefined : conversationReason(shared);
        }),
      );
    }),
  );
}

/**
 * Whether the running turn of `agent` must stop after the response that just asked for tools:
 * the tool round would take tool calls past a limit, or another dimension has reached one (the
 * next model call would go past it: {@link callRefusal$}), for the agent or its conversation; or
 * the conversation was suspended meanwhile (by another agent's turn).
 */
function roundRefusal$(agent: AgentStreams, context: EpicContext, limits: BudgetLimits): Observable<string | undefined> {
  return forkJoin([context.snapshot(agent.turn, turnEngine), context.snapshot(agent.root, conversation)]).pipe(
    switchMap(([turn, talk]) => {
      if (turn?.state.value !== 'tool_executing') return of(undefined);
      if (talk?.state.value === 'suspended') return of(`the conversation is suspended${talk.state.reason === undefined ? '' : `: ${talk.state.reason}`}`);
      return callRefusal$(agent, context, limits);
    }),
  );
}

/** The wall clock left to a turn of `agent` that has used none yet: the least of its own and its conversation's, or `undefined` for no limit. */
function wallClockLeft(
  lifecycle: AgentLifecycleState | undefined,
  talk: ConversationState | undefined,
  talkUsed: Usage,
  limits: BudgetLimits,
): { left: number; overrun: (used: number) => string } | undefined {
  const candidates: { left: number; overrun: (used: number) => string }[] = [];
  const own = lifecycle === undefined ? undefined : agentLimits(lifecycle, limits)?.wallClockMs;
  if (own !== undefined && lifecycle !== undefined) {
    candidates.push({
      left: own - lifecycle.usage.wallClockMs,
      overrun: (used) => agentReason({ dimension: 'wallClockMs', used: lifecycle.usage.wallClockMs + used, limit: own }),
    });
  }
  const shared = conversationLimits(talk, limits)?.wallClockMs;
  if (shared !== undefined && talk !== undefined) {
    candidates.push({
      left: shared - talkUsed.wallClockMs,
      overrun: (used) => conversationReason({ dimension: 'wallClockMs', used: talkUsed.wallClockMs + used, limit: shared }),
    });
  }
  return candidates.sort((a, b) => a.left - b.left)[0];
}

/**
 * A running turn's wall-clock deadline: a durable deadline at its start plus the wall clock its
 * agent and conversation have left, that interrupts it. Computed from the log, so a restart
 * re-arms it at the same instant (and fires it at once if that has passed).
 */
function wallClockDeadline(agent: AgentStreams, startRune: { at: number } | undefined, context: EpicContext, limits: BudgetLimits): Observable<EpicCommand> {
  return defer(async () => {
    const [lifecycle, talk] = await Promise.all([stateOf(context, agent.lifecycle, agentLifecycle), stateOf(context, agent.root, conversation)]);
    // The conversation's agents' usage: listed only when it has a wall-clock limit.
    const talkUsed = conversationLimits(talk, limits)?.wallClockMs === undefined ? NO_USAGE : await lastValueFrom(conversationUsage$(agent.root, context));
    const wall = wallClockLeft(lifecycle, talk, talkUsed, limits);
    if (wall === undefined) return undefined;
    const startedAt = startRune?.at ?? (await turnStartedAt(agent.turn, context));
    return startedAt === undefined ? undefined : { startedAt, ...wall };
  }).pipe(
    switchMap((due) => {
      if (due === undefined) return EMPTY;
      const at = due.startedAt + Math.max(0, due.left);
      return durableDeadline(at, undefined, { scheduler: context.scheduler }).pipe(
        mergeMap(() => {
          const used = Math.max(0, context.scheduler.now() - due.startedAt);
          return [{ stream: agent.turn, event: { type: 'interrupt', reason: due.overrun(used) }, by: 'timer' } satisfies EpicCommand];
        }),
      );
    }),
  );
}

/**
 * Budgets of seed 003 (INV-AGENT-BUDGET), per agent and per conversation: input and output tokens,
 * model calls, tool calls, wall clock and cost (see `Usage`; each turn's usage reaches the agent's
 * lifecycle and its conversation when the turn ends). A limit is the most that may be used.
 *
 * 1. An idle agent whose usage has reached a limit gets `budget_exhausted` (its reason names the
 *    dimension, used and limit) and is terminated, its usage the stats of its `agent.terminated`.
 * 2. A conversation whose usage has reached a limit gets `budget_exhausted {reason, budgetInfo}`
 *    and is `suspended`: `agentTurns` interrupts every turn that starts there, with that reason,
 *    until `budget_replenished` (whose `budget`, if given, replaces the limits; usage keeps counting).
 * 3. A turn that crosses a line stops at its next safe boundary: after the response that asked
 *    for a tool round that would take tool calls past their limit, or that used up a token, model
 *    call or cost limit (no further model call could be made), the turn is interrupted (the round's
 *    calls are cancelled). Other agents' turns in a conversation suspended meanwhile stop there too.
 * 4. Wall clock (a turn's time from its `turn.started` rune to its end): a running turn has a
 *    durable deadline at its start plus the time its agent and conversation have left; it
 *    interrupts the turn, and is re-armed after a restart.
 * 5. A turn that starts when the agent or its conversation is already over a limit is interrupted
 *    at once by `agentTurns` (see {@link budgetRefusal}), and 1 or 2 follows.
 *
 * Cost: the price table of `agentEpics({ prices })`, per model id; a response whose model has no
 * price adds no cost. Wall clock of a conversation: its turns' times summed (agents side by side
 * each count).
 */
export function agentBudgets(limits: BudgetLimits): Epic {
  const budgets: Array<[string, unknown]> = [
    ['budget', limits.budget],
    ['conversationBudget', limits.conversationBudget],
    ...Object.entries(typeof limits.budgetsByRole === 'function' ? {} : (limits.budgetsByRole ?? {})).map(([role, budget]): [string, unknown] => [
      `budgetsByRole.${role}`,
      budget,
    ]),
  ];
  for (const [option, budget] of budgets) {
    const parsed = Budget.optional().safeParse(budget);
    if (!parsed.success) throw new TypeError(`agentBudgets: "${option}" is not a budget: ${z.prettifyError(parsed.error).replaceAll('\n', '; ')}`);
  }
  const exhaustedAgents = stateEffects({
    name: 'agentBudgets.agents',
    machine: agentLifecycle,
    states: ['idle'],
    effects: (view): EffectsByKey<typeof agentLifecycle> => {
      const byRole = limits.budgetsByRole;
      if (limits.budget === undefined && typeof byRole !== 'function' && Object.values(byRole ?? {}).every((budget) => budget === undefined)) return {};
      const check = defer(async (): Promise<EpicCommand[]> => {
        const lifecycle = await firstValueFrom(view.state$);
        const overrun = lifecycle === undefined ? undefined : budgetOverrun(lifecycle.usage, agentLimits(lifecycle, limits));
        return overrun === undefined ? [] : [{ stream: view.stream, event: { type: 'budget_exhausted', reason: agentReason(overrun) } }];
      });
      return { [`budget@${view.seq}`]: check.pipe(mergeMap((commands) => from(commands))) };
    },
  });

  const exhaustedConversations = stateEffects({
    name: 'agentBudgets.conversations',
    machine: conversation,
    states: ['active'],
    effects: (view, context): EffectsByKey<typeof conversation> => {
      // Found in the store at start: only worth hydrating when a conversation budget is configured.
      if (view.rune === undefined && limits.conversationBudget === undefined) return {};
      return { [`budget@${view.seq}`]: defer(() => conversationCheck(view.stream, context)).pipe(mergeMap((commands) => from(commands))) };
    },
  });

  /**
   * Whether conversation `root` is over its limits (its agents' usage summed), if it is active:
   * then its `budget_exhausted`, once per durable state of it (an agent's end and a rune of its
   * own may both find it over).
   */
  const suspendedAt = new Map<string, number>();
  const conversationCheck = async (root: string, context: EpicContext): Promise<EpicCommand[]> => {
    const talk = await firstValueFrom(context.snapshot(root, conversation));
    const budget = talk?.state.value === 'active' ? conversationLimits(talk.state, limits) : undefined;
    if (talk === undefined || budget === undefined || suspendedAt.get(root) === talk.seq) return [];
    const used = await lastValueFrom(conversationUsage$(root, context));
    const overrun = budgetOverrun(used, budget);
    if (overrun === undefined) return [];
    keepNewest(suspendedAt, root, talk.seq);
    return [suspend(root, used, budget, overrun)];
  };

  /** An agent heard its turn end (its lifecycle idle again, live): its conversation's usage grew. One conversation at a time. */
  const agentsEnded = (runes$: Observable<Rune>, context: EpicContext): Observable<EpicCommand> =>
    runes$.pipe(
      concatMapByKey(
        (rune) => (rune.machine === agentLifecycle.id && rune.to === 'idle' && rune.from === 'running_turn' ? agentOfLifecycle(rune.stream)?.root : undefined),
        (rune) => defer(() => conversationCheck(agentOfLifecycle(rune.stream)!.root, context)).pipe(mergeMap((commands) => from(commands))),
      ),
    );

  const runningTurns = stateEffects({
    name: 'agentBudgets.turns',
    machine: turnEngine,
    states: ['streaming', 'tool_executing'],
    unchangedBy: TURN_PROGRESS,
    effects: (view, context): EffectsByKey<typeof turnEngine> => {
      const agent = agentOfTurn(view.stream);
      if (agent === undefined) return {};
      const startRune = view.rune?.event.type === 'start_turn' ? view.rune : undefined;
      const effects: Record<string, Observable<EpicCommand>> = { wallClock: wallClockDeadline(agent, startRune, context, limits) };
      if (view.value === 'tool_executing') {
        effects[`round@${view.seq}`] = roundRefusal$(agent, context, limits).pipe(
          mergeMap((reason) => (reason === undefined ? [] : [{ stream: view.stream, event: { type: 'interrupt', reason } } satisfies EpicCommand])),
        );
      }
      return effects;
    },
  });

  return function agentBudgets(runes$, context, deps) {
    return merge(exhaustedAgents(runes$, context, deps), exhaustedConversations(runes$, context, deps), agentsEnded(runes$, context), runningTurns(runes$, context, deps));
  };
}
