import { map } from 'rxjs';
import { z } from 'zod';
import { autonomyLoop } from '../../reducers/autonomy-loop/machine.js';
import type { AutonomyLoopEvent, AutonomyLoopState } from '../../reducers/autonomy-loop/schema.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand } from '../../streams/epic.js';
import type { EffectsByKey } from '../../streams/state-effects.js';
import { resolveAutonomyOptions, type AutonomyOptions, type ResolvedAutonomyOptions } from './autonomy-options.js';
import { criticRequest } from './prompts.js';
import { earlierAttempts, refusedEvent, schemaCheck, structuredAnswer$ } from './structured-answer.js';

const Findings = z.string().min(1).max(16_000);

/** The critic's structured verdict: the goal is met, some tasks must run again, or the plan must change. */
export const CriticVerdict = z.discriminatedUnion('verdict', [
  z.strictObject({ verdict: z.literal('pass'), summary: z.string().max(16_000) }),
  z.strictObject({ verdict: z.literal('retry'), findings: Findings, tasks: z.array(z.string().min(1)).min(1).max(500) }),
  z.strictObject({ verdict: z.literal('replan'), findings: Findings }),
]);
export type CriticVerdict = z.infer<typeof CriticVerdict>;

/** What a verdict does to the plan, by the documented rules (retries bounded by `maxTaskAttempts`, replans by `maxReplans`). */
export function verdictEvent(plan: AutonomyLoopState, verdict: CriticVerdict, options: Pick<ResolvedAutonomyOptions, 'maxTaskAttempts' | 'maxReplans'>): AutonomyLoopEvent {
  if (verdict.verdict === 'pass') return { type: 'critique_passed', summary: verdict.summary };
  if (verdict.verdict === 'replan') {
    if (plan.replans >= options.maxReplans)
      return { type: 'unresolvable', reason: `critic: the plan needs changing (${verdict.findings}), and its ${options.maxReplans} replans (maxReplans) are used up` };
    return { type: 'needs_replan', findings: verdict.findings };
  }
  const named = plan.tasks.filter((task) => verdict.tasks.includes(task.id));
  const retry = named.filter((task) => task.attempts < options.maxTaskAttempts).map((task) => task.id);
  if (retry.length === 0) {
    return {
      type: 'unresolvable',
      reason: `critic: ${verdict.findings}; ${named.map((task) => `"${task.id}"`).join(', ')} ran ${options.maxTaskAttempts} times (maxTaskAttempts)`,
    };
  }
  return { type: 'critique_found_issues', findings: verdict.findings, retry };
}

/**
 * The critic of the autonomy loop (seed 003): in `reviewing`, a model call with the goal and every
 * task's result, answering a {@link CriticVerdict}:
 *
 * - `pass` -> `critique_passed {summary}` -> `goal_met`;
 * - `retry` -> `critique_found_issues {findings, retry}`: the named tasks that have run fewer than
 *   `maxTaskAttempts` times are pending again; if none has, `unresolvable` stops the loop;
 * - `replan` -> `needs_replan {findings}` -> `planning`, at most `maxReplans` times, then `unresolvable`.
 *
 * An answer that fails the schema (or names a task the plan does not have) is asked again, as
 * the planner's is, up to `maxPlannerAttempts`; then `unresolvable` with the reason.
 */
export function autonomyCritic(autonomyOptions: AutonomyOptions): Epic {
  const options = resolveAutonomyOptions(autonomyOptions);
  return stateEffects({
    name: 'autonomyCritic',
    machine: autonomyLoop,
    states: ['reviewing'],
    withState: true,
    effects: (view, context): EffectsByKey<typeof autonomyLoop> => {
      const plan = view.state!;
      const ids = new Set(plan.tasks.map((task) => task.id));
      const check = schemaCheck(CriticVerdict, (verdict) => {
        const unknown = verdict.verdict === 'retry' ? verdict.tasks.find((id) => !ids.has(id)) : undefined;
        return unknown === undefined ? undefined : `task "${unknown}" is not a task of the plan; its tasks are ${[...ids].join(', ')}`;
      });
      // Each review of a plan follows a replan or a task completed since the last one.
      const question = `review@${plan.replans}.${plan.tasksCompleted}`;
      return {
        critique: structuredAnswer$(options.review, criticRequest(plan), check, options.maxPlannerAttempts, context, earlierAttempts(plan, question)).pipe(
          map((out): AutonomyLoopEvent | EpicCommand => {
            if (out.type === 'command') return out.command;
            if (out.type === 'refused') return refusedEvent(question, out.error);
            return out.type === 'answer' ? verdictEvent(plan, out.value, options) : { type: 'unresolvable', reason: `critic: ${out.reason}` };
          }),
        ),
      };
    },
  });
}
