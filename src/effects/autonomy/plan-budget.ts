import { concat, concatMap, filter, first, from, map, merge, mergeMap, of, type Observable } from 'rxjs';
import { autonomyLoop } from '../../reducers/autonomy-loop/machine.js';
import type { AutonomyLoopEvent } from '../../reducers/autonomy-loop/schema.js';
import { isTaskActive } from '../../reducers/autonomy-loop/tasks.js';
import { budgetOverrun, describeOverrun, usageSince, type Usage } from '../../reducers/budget.js';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import { agentStreams, parseStreamId } from '../../reducers/stream-ids.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand } from '../../streams/epic.js';
import type { EffectsByKey } from '../../streams/state-effects.js';
import { conversationUsage$ } from '../agent/conversation-usage.js';
import { stateOf } from '../agent/state-of.js';
import { resolveAutonomyOptions, type AutonomyOptions } from './autonomy-options.js';

/** Turn states in which a task's turn is under way: a stopped plan interrupts it. */
const IN_FLIGHT = new Set(['streaming', 'tool_executing']);

/**
 * The plan's limits (seed 003): while it executes, the conversation's usage (all its agents'
 * turns, as their lifecycles sum them: `conversationUsage$`) since the plan started is checked against
 * `budget` at the start and after every turn; a dimension reached -> `budget_exhausted` (reason:
 * `budget: outputTokens 40 of 40`) -> `stopped`. The plan's zero is the conversation's usage
 * when it first executes, recorded in the plan (`budget_started`, rune `plan.budget_started`), so
 * what the conversation used before the plan does not count, and a restart counts from the same zero. A plan that stops live (a budget, a user's `user_cancel`, any stop) interrupts
 * the turns of its running tasks, reason `plan stopped: <why>`.
 */
export function autonomyBudget(autonomyOptions: AutonomyOptions): Epic {
  const options = resolveAutonomyOptions(autonomyOptions);
  const { budget } = options;
  return function autonomyBudget(runes$, context, deps) {
    const limits = stateEffects({
      name: 'autonomyBudget',
      machine: autonomyLoop,
      states: budget === undefined ? [] : ['executing'],
      withState: true,
      effects: (view): EffectsByKey<typeof autonomyLoop> => {
        const parts = parseStreamId(view.stream);
        if (parts?.kind !== 'plan') return {};
        const root = parts.root;
        const recorded = view.state!.usageAtStart;
        // The conversation's usage is its agents': it grows as an agent hears its turn end.
        const agents = `${root}/agent/`;
        const check$ = (start: Usage): Observable<AutonomyLoopEvent> =>
          merge(of(undefined), runes$.pipe(filter((rune) => rune.machine === agentLifecycle.id && rune.stream.startsWith(agents)))).pipe(
            concatMap(() => conversationUsage$(root, context)),
            map((used) => budgetOverrun(usageSince(used, start), budget)),
            filter((overrun) => overrun !== undefined),
            first(),
            map((overrun) => ({ type: 'budget_exhausted' as const, reason: `budget: ${describeOverrun(overrun)}` })),
          );
        return {
          budget:
            recorded !== undefined
              ? check$(recorded)
              : conversationUsage$(root, context).pipe(mergeMap((start) => concat(of<AutonomyLoopEvent>({ type: 'budget_started', usage: start }), check$(start)))),
        };
      },
    });
    const stop = stateEffects({
      name: 'autonomyStop',
      machine: autonomyLoop,
      states: ['stopped'],
      effects: (view): EffectsByKey<typeof autonomyLoop> => {
        const parts = parseStreamId(view.stream);
        // Resumed: a turn in flight when the process died was interrupted by its restart already.
        if (view.origin !== 'live' || parts?.kind !== 'plan') return {};
        return {
          interrupt: view.state$.pipe(
            mergeMap((plan) => from((plan?.tasks.filter(isTaskActive) ?? []).map((task) => ({ task, reason: `plan stopped: ${plan?.reason ?? 'stopped'}` })))),
            mergeMap(async ({ task, reason }): Promise<EpicCommand[]> => {
              const agent = agentStreams(parts.root, task.agentId!);
              const turn = await stateOf(context, agent.turn, turnEngine);
              return turn !== undefined && IN_FLIGHT.has(turn.value) ? [{ stream: agent.turn, event: { type: 'interrupt', reason } }] : [];
            }),
            mergeMap((commands) => commands),
          ),
        };
      },
    });
    return merge(limits(runes$, context, deps), stop(runes$, context, deps));
  };
}
