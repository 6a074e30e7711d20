import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { AutonomyLoopEvent, AutonomyLoopInput, AutonomyLoopPayloads, AutonomyLoopState, AutonomyLoopStateName } from './schema.js';

type S = AutonomyLoopState;
type E = AutonomyLoopEvent;
type P = typeof AutonomyLoopPayloads;

/** Why the loop stopped, kept in the state and the `plan.stopped` payload: the event's own reason, else its type. */
const stopReason = (_: S, e: Extract<E, { type: 'user_cancel' | 'unresolvable' | 'budget_exhausted' }>) => ({
  reason: ('reason' in e ? e.reason : undefined) ?? e.type,
});
/** The `plan.critique` payload. */
const critique = (s: S, e: Extract<E, { type: 'critique_found_issues' | 'needs_replan' }>) => ({ planId: s.planId, findings: e.findings });

/** Seed 003 Autonomy Loop diagram, edge for edge, with the rune kinds of its "Autonomy Events" table. */
const table: readonly Row<S, E, P>[] = [
  {
    from: 'goal_received',
    on: 'decompose_goal',
    to: 'planning',
    kind: 'plan.created',
    assign: (_, e) => ({ planId: e.planId, tasks: e.tasks }),
    payload: (_, e) => ({ planId: e.planId, tasks: e.tasks }),
  },
  { from: 'planning', on: 'plan_approved', to: 'executing' },
  { from: 'planning', on: 'auto_start', to: 'executing' },
  { from: 'planning', on: 'plan_rejected', to: 'goal_received', kind: 'plan.updated', payload: (s, e) => ({ planId: s.planId, changes: e.changes }) },
  { from: 'planning', on: 'user_cancel', to: 'stopped', kind: 'plan.stopped', assign: stopReason, payload: stopReason },
  { from: 'executing', on: 'all_tasks_terminal', to: 'reviewing' },
  {
    from: 'executing',
    on: 'task_completed',
    kind: 'plan.task_completed',
    assign: (s) => ({ tasksCompleted: s.tasksCompleted + 1 }),
    payload: (_, e) => ({ taskId: e.taskId, result: e.result, evidence: e.evidence }),
    // The last task's completion must not lose its rune; all_tasks_terminal is what moves on.
    note: 'drawn as task_completed(more_pending); accepted whatever morePending says',
  },
  {
    from: 'executing',
    on: 'task_assigned',
    kind: 'plan.task_assigned',
    payload: (_, e) => ({ taskId: e.taskId, agentId: e.agentId }),
    note: 'the rune table, not the diagram, gives plan.task_assigned in executing',
  },
  {
    from: 'executing',
    on: 'task_started',
    kind: 'plan.task_started',
    payload: (_, e) => ({ taskId: e.taskId }),
    note: 'the rune table, not the diagram, gives plan.task_started in executing',
  },
  { from: 'executing', on: 'all_runnable_blocked', to: 'blocked' },
  { from: 'executing', on: 'budget_exhausted', to: 'stopped', kind: 'plan.stopped', assign: stopReason, payload: stopReason },
  { from: 'executing', on: 'user_cancel', to: 'stopped', kind: 'plan.stopped', assign: stopReason, payload: stopReason },
  {
    from: 'reviewing',
    on: 'critique_found_issues',
    to: 'executing',
    kind: 'plan.critique',
    assign: (_, e) => ({ findings: e.findings }),
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
  { from: 'reviewing', on: 'needs_replan', to: 'planning', kind: 'plan.critique', assign: (_, e) => ({ findings: e.findings }), payload: critique },
  { from: 'blocked', on: 'dependency_resolved', to: 'executing' },
  { from: 'blocked', on: 'unresolvable', to: 'stopped', kind: 'plan.stopped', assign: stopReason, payload: stopReason },
  { from: 'blocked', on: 'user_cancel', to: 'stopped', kind: 'plan.stopped', assign: stopReason, payload: stopReason },
  {
    from: ['goal_received', 'reviewing'],
    on: 'user_cancel',
    to: 'stopped',
    kind: 'plan.stopped',
    assign: stopReason,
    payload: stopReason,
    source: 'extension',
    note: 'a user can always stop the loop, not only where the diagram draws user_cancel',
  },
];

/**
 * The goal-directed autonomy loop of seed 003: `goal_received` -> `planning` -> `executing`
 * (<-> `blocked`) -> `reviewing`, ending `goal_met` or `stopped`. Each rune kind's payload is in
 * `AutonomyLoopPayloads`.
 *
 * @example
 * ```ts
 * import { autonomyLoop } from 'runestream';
 * let s = autonomyLoop.initial({ goal: 'ship v1' });                                  // goal_received
 * s = autonomyLoop.transition(s, { type: 'decompose_goal', planId: 'p1', tasks: [] }); // planning
 * s = autonomyLoop.transition(s, { type: 'auto_start' });                              // executing
 * console.log(autonomyLoop.step(s, { type: 'task_completed', morePending: true, taskId: 't1' }));
 * // Logs: { accepted: true, state: { value: 'executing', ... tasksCompleted: 1, ... }, kind: 'plan.task_completed', payload: { taskId: 't1', ... } }
 * ```
 */
export const autonomyLoop = defineMachine<S, E, AutonomyLoopInput, P>({
  id: 'autonomy-loop',
  states: AutonomyLoopStateName.options,
  terminal: ['goal_met', 'stopped'],
  events: eventTypesOf(AutonomyLoopEvent),
  schemas: { state: AutonomyLoopState, event: AutonomyLoopEvent, input: AutonomyLoopInput },
  initial: ({ goal }) => ({ value: 'goal_received', goal, tasksCompleted: 0 }),
  table,
  spawnKind: 'plan.goal_received',
  payloads: AutonomyLoopPayloads,
  spawnPayload: ({ goal }) => ({ goalDescription: goal }),
});
