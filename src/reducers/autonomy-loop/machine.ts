import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { AutonomyLoopEvent, AutonomyLoopInput, AutonomyLoopState, AutonomyLoopStateName } from './schema.js';

type S = AutonomyLoopState;
type E = AutonomyLoopEvent;

/** Why the loop stopped, for the `plan.stopped` rune's `reason`: the event's own reason, else its type. */
const stopReason = (_: S, e: Extract<E, { type: 'user_cancel' | 'unresolvable' | 'budget_exhausted' }>) => ({
  reason: ('reason' in e ? e.reason : undefined) ?? e.type,
});

/** Seed 003 Autonomy Loop diagram, edge for edge, with the rune kinds of its "Autonomy Events" table. */
const table: readonly Row<S, E>[] = [
  {
    from: 'goal_received',
    on: 'decompose_goal',
    to: 'planning',
    kind: 'plan.created',
    assign: (_, e) => ({ planId: e.planId, tasks: e.tasks }),
  },
  { from: 'planning', on: 'plan_approved', to: 'executing' },
  { from: 'planning', on: 'auto_start', to: 'executing' },
  { from: 'planning', on: 'plan_rejected', to: 'goal_received', kind: 'plan.updated' },
  { from: 'planning', on: 'user_cancel', to: 'stopped', kind: 'plan.stopped', assign: stopReason },
  { from: 'executing', on: 'all_tasks_terminal', to: 'reviewing' },
  {
    from: 'executing',
    on: 'task_completed',
    kind: 'plan.task_completed',
    assign: (s) => ({ tasksCompleted: s.tasksCompleted + 1 }),
    // The last task's completion must not lose its rune; all_tasks_terminal is what moves on.
    note: 'drawn as task_completed(more_pending); accepted whatever morePending says',
  },
  {
    from: 'executing',
    on: 'task_assigned',
    kind: 'plan.task_assigned',
    note: 'the rune table, not the diagram, gives plan.task_assigned in executing',
  },
  {
    from: 'executing',
    on: 'task_started',
    kind: 'plan.task_started',
    note: 'the rune table, not the diagram, gives plan.task_started in executing',
  },
  { from: 'executing', on: 'all_runnable_blocked', to: 'blocked' },
  { from: 'executing', on: 'budget_exhausted', to: 'stopped', kind: 'plan.stopped', assign: stopReason },
  { from: 'executing', on: 'user_cancel', to: 'stopped', kind: 'plan.stopped', assign: stopReason },
  { from: 'reviewing', on: 'critique_found_issues', to: 'executing', kind: 'plan.critique', assign: (_, e) => ({ findings: e.findings }) },
  { from: 'reviewing', on: 'critique_passed', to: 'goal_met', kind: 'plan.goal_met', assign: (_, e) => ({ summary: e.summary }) },
  { from: 'reviewing', on: 'needs_replan', to: 'planning', kind: 'plan.critique', assign: (_, e) => ({ findings: e.findings }) },
  { from: 'blocked', on: 'dependency_resolved', to: 'executing' },
  { from: 'blocked', on: 'unresolvable', to: 'stopped', kind: 'plan.stopped', assign: stopReason },
  { from: 'blocked', on: 'user_cancel', to: 'stopped', kind: 'plan.stopped', assign: stopReason },
  {
    from: ['goal_received', 'reviewing'],
    on: 'user_cancel',
    to: 'stopped',
    kind: 'plan.stopped',
    assign: stopReason,
    source: 'extension',
    note: 'a user can always stop the loop, not only where the diagram draws user_cancel',
  },
];

/**
 * The goal-directed autonomy loop of seed 003: `goal_received` -> `planning` -> `executing`
 * (<-> `blocked`) -> `reviewing`, ending `goal_met` or `stopped`.
 *
 * @example
 * ```ts
 * import { autonomyLoop } from 'runestream';
 * let s = autonomyLoop.initial({ goal: 'ship v1' });                                  // goal_received
 * s = autonomyLoop.transition(s, { type: 'decompose_goal', planId: 'p1', tasks: [] }); // planning
 * s = autonomyLoop.transition(s, { type: 'auto_start' });                              // executing
 * console.log(autonomyLoop.step(s, { type: 'task_completed', morePending: true, taskId: 't1' }));
 * // Logs: { accepted: true, state: { value: 'executing', ... tasksCompleted: 1, ... }, kind: 'plan.task_completed' }
 * ```
 */
export const autonomyLoop = defineMachine<S, E, AutonomyLoopInput>({
  id: 'autonomy-loop',
  states: AutonomyLoopStateName.options,
  terminal: ['goal_met', 'stopped'],
  events: eventTypesOf(AutonomyLoopEvent),
  schemas: { state: AutonomyLoopState, event: AutonomyLoopEvent, input: AutonomyLoopInput },
  initial: ({ goal }) => ({ value: 'goal_received', goal, tasksCompleted: 0 }),
  table,
  spawnKind: 'plan.goal_received',
});
