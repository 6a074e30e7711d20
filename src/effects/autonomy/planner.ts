import { EMPTY, Observable, defer, map, mergeMap, of, take } from 'rxjs';
import { z } from 'zod';
import { conversation } from '../../reducers/conversation/machine.js';
import { autonomyLoop } from '../../reducers/autonomy-loop/machine.js';
import { PlanTasks, type AutonomyLoopEvent, type AutonomyLoopState, type PlanTask } from '../../reducers/autonomy-loop/schema.js';
import { planProblem } from '../../reducers/autonomy-loop/tasks.js';
import { parseStreamId } from '../../reducers/stream-ids.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand, EpicContext } from '../../streams/epic.js';
import type { EffectsByKey } from '../../streams/state-effects.js';
import { resolveAutonomyOptions, type AutonomyOptions, type ResolvedAutonomyOptions } from './autonomy-options.js';
import { plannerRequest } from './prompts.js';
import { earlierAttempts, refusedEvent, schemaCheck, structuredAnswer$, type AnswerCheck } from './structured-answer.js';

/** The planner's structured answer: the plan's tasks (their schema is the machine's own). */
export const PlanAnswer = z.strictObject({ tasks: PlanTasks });
export type PlanAnswer = z.infer<typeof PlanAnswer>;

/** The check of a planner's answer: the schema, then ids, dependencies (a cycle is named) and the configured roles. */
export function planCheck(roles: ResolvedAutonomyOptions['roles']): AnswerCheck<PlanAnswer> {
  return schemaCheck(PlanAnswer, ({ tasks }) => {
    const problem = planProblem(tasks);
    if (problem !== undefined) return problem;
    if (roles === undefined) return undefined;
    const unknown = tasks.find((task) => !Object.hasOwn(roles, task.ownerRole));
    return unknown === undefined ? undefined : `task "${unknown.id}" has ownerRole "${unknown.ownerRole}"; the roles are ${Object.keys(roles).join(', ')}`;
  });
}

/** A plan's id: its stream's plan segment (`conv/<c>/plan/<p>`), with the revision after a rejection. */
const planIdOf = (stream: string, plan: AutonomyLoopState): string => {
  const parts = parseStreamId(stream);
  const base = parts?.kind === 'plan' ? parts.planId : 'plan';
  return plan.revisions === 0 ? base : `${base}.r${plan.revisions}`;
};

/**
 * The plan's conversation, created (active) if it is not there: the agents the scheduler spawns
 * later, several at once, then find it rather than each creating it. An Observable all the way, so
 * a context that answers at once (a test's) answers in the same virtual frame.
 */
const conversation$ = (stream: string, context: EpicContext): Observable<EpicCommand> => {
  const parts = parseStreamId(stream);
  if (parts?.kind !== 'plan') return EMPTY;
  return defer(() => context.snapshot(parts.root, conversation)).pipe(
    take(1),
    mergeMap((talk): EpicCommand[] =>
      talk?.state !== undefined
        ? []
        : [
            { stream: parts.root, spawn: conversation.id, input: { conversationId: parts.id } },
            { stream: parts.root, event: { type: 'agent_ready' } },
          ],
    ),
  );
};

/**
 * The planner of the autonomy loop (seed 003): a model call whose JSON answer is checked by
 * {@link planCheck}.
 *
 * 1. In `goal_received` (a new goal, or a plan the client rejected with `changes`): the planner is
 *    asked for a plan -> `decompose_goal {planId, tasks}`; the plan's conversation is created if
 *    it is not there yet.
 * 2. In `planning` after `needs_replan`: asked again with the tasks, their results and the
 *    critic's findings -> `plan_revised {tasks}` (`plan.updated`).
 * 3. An answer that fails the schema, or has a duplicate id, a dependency on an unknown task, a
 *    cycle (named: `a -> b -> a`) or an unknown role, is refused and the planner asked again with
 *    the error, up to `maxPlannerAttempts` calls; then `planner_failed` stops the loop with the reason.
 * 4. A plan ready in `planning`: `auto_start` when `autoStart`, else it waits for a client's
 *    `plan_approved` or `plan_rejected`.
 *
 * An effect of the plan's state: after a restart an unanswered planner is asked again.
 */
export function autonomyPlanner(autonomyOptions: AutonomyOptions): Epic {
  const options = resolveAutonomyOptions(autonomyOptions);
  const check = planCheck(options.roles);
  /** The planner asked `question` (`plan@<revisions>`, `replan@<replans>`), its refusals recorded, going on from those the plan has. */
  const ask = (plan: AutonomyLoopState, question: string, context: EpicContext, answer: (tasks: PlanTask[]) => AutonomyLoopEvent) =>
    structuredAnswer$(options.plan, plannerRequest(plan, options.roles), check, options.maxPlannerAttempts, context, earlierAttempts(plan, question)).pipe(
      map((out): AutonomyLoopEvent | EpicCommand => {
        if (out.type === 'command') return out.command;
        if (out.type === 'refused') return refusedEvent(question, out.error);
        return out.type === 'answer' ? answer(out.value.tasks) : { type: 'planner_failed', reason: `planner: ${out.reason}` };
      }),
    );
  return stateEffects({
    name: 'autonomyPlanner',
    machine: autonomyLoop,
    states: ['goal_received', 'planning'],
    withState: true,
    effects: (view, context): EffectsByKey<typeof autonomyLoop> => {
      const plan = view.state!;
      if (plan.value === 'goal_received') {
        const question = `plan@${plan.revisions}`;
        return {
          conversation: conversation$(view.stream, context),
          [question]: ask(plan, question, context, (tasks) => ({ type: 'decompose_goal', planId: planIdOf(view.stream, plan), tasks })),
        };
      }
      if (plan.replanning === true) {
        const question = `replan@${plan.replans}`;
        return { [question]: ask(plan, question, context, (tasks) => ({ type: 'plan_revised', tasks })) };
      }
      return options.autoStart ? { autoStart: of({ type: 'auto_start' as const }) } : {};
    },
  });
}
