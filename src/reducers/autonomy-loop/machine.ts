import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { AutonomyLoopEvent, AutonomyLoopInput, AutonomyLoopPayloads, AutonomyLoopState, AutonomyLoopStateName, type PlanTask, type TaskState } from './schema.js';
import { allRunnableBlocked, allTasksTerminal, isTaskTerminal, pendingTasks, planProblem, revisedTasks, runnableTasks, taskOf, updateTask } from './tasks.js';

type S = AutonomyLoopState;
type E = AutonomyLoopEvent;
type P = typeof AutonomyLoopPayloads;

/** Why the loop stopped, kept in the state and the `plan.stopped` payload: the event's own reason, else its type. */
const stopReason = (_: S, e: Extract<E, { type: 'user_cancel' | 'unresolvable' | 'budget_exhausted' | 'planner_failed' }>) => ({
  reason: ('reason' in e ? e.reason : undefined) ?? e.type,
});
/** The `plan.critique` payload. */
const critique = (s: S, e: Extract<E, { type: 'critique_found_issues' | 'needs_replan' }>) => ({
  planId: s.planId,
  findings: e.findings,
  ...('retry' in e ? { retry: e.retry } : {}),
});
/** The number of a refused answer: one more than those refused for the same question before. */
const refusedAttempts = (s: S, e: { question: string }): number => (s.refused?.question === e.question ? s.refused.attempts : 0) + 1;
const stop = { to: 'stopped', kind: 'plan.stopped', assign: stopReason, payload: stopReason } as const;

const PLAN_GUARD = 'an acyclic plan of unique, known task ids';
const READY = 'a plan ready (not being revised)';
const isPlan = (_: S, e: { tasks: readonly PlanTask[] }): boolean => planProblem(e.tasks) === undefined;
const ready = (s: S): boolean => s.replanning !== true && s.tasks.length > 0;
const taskIs =
  (...statuses: TaskState['status'][]) =>
  (s: S, e: { taskId: string }): boolean => {
    const status = taskOf(s.tasks, e.taskId)?.status;
    return status !== undefined && statuses.includes(status);
  };

/** Seed 003 Autonomy Loop diagram, edge for edge, with the rune kinds of its "Autonomy Events" table. */
const table: readonly Row<S, E, P>[] = [
  {
    from: 'goal_received',
    on: 'decompose_goal',
    to: 'planning',
    when: isPlan,
    label: PLAN_GUARD,
    kind: 'plan.created',
    assign: (_, e) => ({ planId: e.planId, tasks: pendingTasks(e.tasks), replanning: false }),
    payload: (_, e) => ({ planId: e.planId, tasks: e.tasks }),
  },
  { from: 'planning', on: 'plan_approved', to: 'executing', when: ready, label: READY },
  { from: 'planning', on: 'auto_start', to: 'executing', when: ready, label: READY },
  {
    from: 'planning',
    on: 'plan_rejected',
    to: 'goal_received',
    kind: 'plan.updated',
    assign: (s, e) => ({ revisions: s.revisions + 1, changes: e.changes, replanning: false }),
    payload: (s, e) => ({ planId: s.planId, changes: e.changes }),
  },
  { from: 'planning', on: 'user_cancel', ...stop },
  { from: 'executing', on: 'all_tasks_terminal', to: 'reviewing', when: (s) => allTasksTerminal(s.tasks), label: 'every task done or failed' },
  {
    from: 'executing',
    on: 'task_completed',
    when: taskIs('assigned', 'running'),
    label: 'the task is with an agent',
    kind: 'plan.task_completed',
    assign: (s, e) => ({
      tasksCompleted: s.tasksCompleted + 1,
      tasks: updateTask(s.tasks, e.taskId, (task) => ({
        ...task,
        status: e.outcome === 'success' ? 'done' : 'failed',
        result: e.result,
        ...(e.evidence === undefined ? {} : { evidence: e.evidence }),
      })),
    }),
    payload: (_, e) => ({ taskId: e.taskId, outcome: e.outcome, result: e.result, evidence: e.evidence }),
    // The last task's completion must not lose its rune; all_tasks_terminal is what moves on.
    note: 'drawn as task_completed(more_pending); accepted whatever morePending says, for a task with an agent (so a completion is logged once)',
  },
  {
    from: 'executing',
    on: 'task_assigned',
    when: taskIs('pending'),
    label: 'the task is pending',
    kind: 'plan.task_assigned',
    assign: (s, e) => ({
      tasks: updateTask(s.tasks, e.taskId, ({ turnNumber: _turn, result: _result, evidence: _evidence, ...task }) => ({
        ...task,
        status: 'assigned',
        agentId: e.agentId,
        attempts: task.attempts + 1,
      })),
    }),
    payload: (_, e) => ({ taskId: e.taskId, agentId: e.agentId }),
    note: 'the rune table, not the diagram, gives plan.task_assigned in executing',
  },
  {
    from: 'executing',
    on: 'task_started',
    when: taskIs('assigned', 'running'),
    label: 'the task is with an agent',
    kind: 'plan.task_started',
    assign: (s, e) => ({ tasks: updateTask(s.tasks, e.taskId, (task) => ({ ...task, status: 'running', turnNumber: e.turnNumber })) }),
    payload: (_, e) => ({ taskId: e.taskId, turnNumber: e.turnNumber }),
    note: 'the rune table, not the diagram, gives plan.task_started in executing; again for a running task, its turn started anew (a restart cut it)',
  },
  { from: 'executing', on: 'all_runnable_blocked', to: 'blocked', when: (s) => allRunnableBlocked(s.tasks), label: 'nothing runnable or running, not all ended' },
  { from: 'executing', on: 'budget_exhausted', ...stop },
  { from: 'executing', on: 'user_cancel', ...stop },
  {
    from: 'reviewing',
    on: 'critique_found_issues',
    to: 'executing',
    when: (s, e) => e.retry.every((id) => taskOf(s.tasks, id) !== undefined && isTaskTerminal(taskOf(s.tasks, id)!)),
    label: 'retry names ended tasks',
    kind: 'plan.critique',
    assign: (s, e) => ({
      findings: e.findings,
      tasks: s.tasks.map((task) => (e.retry.includes(task.id) ? { ...task, status: 'pending' } : task)),
    }),
    payload: critique,
  },
  {
    from: 'reviewing',
    on: 'critique_passed',
    to: 'goal_met',
    kind: 'plan.goal_met',
    assign: (_, e) => ({ summary: e.summary }),
    payload: (s, e) => ({ planId: s.planId, summary: e.summary }),
  },
  {
    from: 'reviewing',
    on: 'needs_replan',
    to: 'planning',
    kind: 'plan.critique',
    assign: (s, e) => ({ findings: e.findings, replanning: true, replans: s.replans + 1 }),
    payload: critique,
  },
  { from: 'blocked', on: 'dependency_resolved', to: 'executing', when: (s) => runnableTasks(s.tasks).length > 0, label: 'a task runnable' },
  { from: 'blocked', on: 'unresolvable', ...stop },
  { from: 'blocked', on: 'user_cancel', ...stop },
  {
    from: ['goal_received', 'reviewing'],
    on: 'user_cancel',
    ...stop,
    source: 'extension',
    note: 'a user can always stop the loop, not only where the diagram draws user_cancel',
  },
  {
    from: 'planning',
    on: 'plan_revised',
    when: (s, e) => s.replanning === true && isPlan(s, e),
    label: `revising, ${PLAN_GUARD}`,
    kind: 'plan.updated',
    assign: (s, e) => ({ tasks: revisedTasks(s.tasks, e.tasks), replanning: false }),
    payload: (s, e) => ({ planId: s.planId, changes: e.changes, tasks: e.tasks }),
    source: 'extension',
    note: "the planner's revised plan after needs_replan (the seed's plan.updated in planning); a done task it keeps (same id and description) is not run again",
  },
  {
    from: 'goal_received',
    on: 'planner_failed',
    ...stop,
    source: 'extension',
    note: 'the planner gave no usable plan within its attempts: the loop stops with why',
  },
  {
    from: 'planning',
    on: 'planner_failed',
    ...stop,
    when: (s) => s.replanning === true,
    label: 'revising',
    source: 'extension',
    note: 'the planner gave no usable revised plan within its attempts',
  },
  {
    from: 'blocked',
    on: 'retry_task',
    when: taskIs('failed'),
    label: 'the task failed',
    kind: 'plan.task_retried',
    assign: (s, e) => ({ tasks: updateTask(s.tasks, e.taskId, (task) => ({ ...task, status: 'pending' })) }),
    payload: (_, e) => ({ taskId: e.taskId }),
    source: 'extension',
    note: "an operator's retry of a failed task: what resolves a blocked plan (dependency_resolved follows)",
  },
  {
    from: 'executing',
    on: 'budget_started',
    when: (s) => s.usageAtStart === undefined,
    label: 'none recorded yet',
    kind: 'plan.budget_started',
    assign: (_, e) => ({ usageAtStart: e.usage }),
    payload: (_, e) => ({ usage: e.usage }),
    source: 'extension',
    note: "the conversation's usage when the plan first executes, recorded once (a restart or a retry keeps it): the plan's budget counts only what was used after it",
  },
  {
    from: ['goal_received', 'planning', 'reviewing'],
    on: 'answer_refused',
    kind: 'plan.answer_refused',
    assign: (s, e) => ({ refused: { question: e.question, attempts: refusedAttempts(s, e), error: e.error } }),
    payload: (s, e) => ({ question: e.question, attempt: refusedAttempts(s, e), error: e.error }),
    source: 'extension',
    note: "a planner's or critic's answer refused, the model asked again: counted in the log, so a restart goes on from the same attempt (maxPlannerAttempts holds across crashes)",
  },
  {
    from: 'reviewing',
    on: 'unresolvable',
    ...stop,
    source: 'extension',
    note: "the critic's retries (maxTaskAttempts) or replans (maxReplans) are used up, or it gave no usable verdict",
  },
  {
    from: 'executing',
    on: 'unresolvable',
    ...stop,
    source: 'extension',
    note: "stalled: no rune of the plan or of its tasks' agents for executingStallMs, so no plan hangs silently",
  },
];

/**
 * The goal-directed autonomy loop of seed 003: `goal_received` -> `planning` -> `executing`
 * (<-> `blocked`) -> `reviewing`, ending `goal_met` or `stopped`. Each rune kind's payload is in
 * `AutonomyLoopPayloads`.
 *
 * Tasks carry their status (`pending`, `assigned`, `running`, `done`, `failed`), so the
 * scheduler's choices follow from the state alone (see `runnableTasks`); a plan with a cycle is
 * refused (`planProblem` names it).
 *
 * @example
 * ```ts
 * import { autonomyLoop } from 'runestream';
 * let s = autonomyLoop.initial({ goal: 'ship v1' }); // goal_received
 * const tasks = [{ id: 'build', description: 'Build it', dependsOn: [], priority: 0, ownerRole: 'dev' }];
 * s = autonomyLoop.transition(s, { type: 'decompose_goal', planId: 'p1', tasks }); // planning
 * s = autonomyLoop.transition(s, { type: 'auto_start' }); // executing
 * s = autonomyLoop.transition(s, { type: 'task_assigned', taskId: 'build', agentId: 'dev-1' });
 * s = autonomyLoop.transition(s, { type: 'task_started', taskId: 'build', turnNumber: 1 });
 * const step = autonomyLoop.step(s, { type: 'task_completed', taskId: 'build', outcome: 'success', result: 'built' });
 * console.log(step.accepted && step.kind, step.state.tasks[0]?.status);
 * // Logs: plan.task_completed done
 * ```
 */
export const autonomyLoop = defineMachine<S, E, AutonomyLoopInput, P>({
  id: 'autonomy-loop',
  states: AutonomyLoopStateName.options,
  terminal: ['goal_met', 'stopped'],
  events: eventTypesOf(AutonomyLoopEvent),
  schemas: { state: AutonomyLoopState, event: AutonomyLoopEvent, input: AutonomyLoopInput },
  initial: ({ goal }) => ({ value: 'goal_received', goal, tasks: [], tasksCompleted: 0, revisions: 0, replans: 0 }),
  table,
  spawnKind: 'plan.goal_received',
  payloads: AutonomyLoopPayloads,
  spawnPayload: ({ goal }) => ({ goalDescription: goal }),
});
