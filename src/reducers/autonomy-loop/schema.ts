import { z } from 'zod';

/** Seed 003 "Autonomy Loop State Machine"; `goal_met` and `stopped` are terminal. */
export const AutonomyLoopStateName = z.enum(['goal_received', 'planning', 'executing', 'reviewing', 'blocked', 'goal_met', 'stopped']);
export type AutonomyLoopStateName = z.infer<typeof AutonomyLoopStateName>;

/** The `plan.goal_received` rune's payload (the seed's `goal_description`). */
export const AutonomyLoopInput = z.object({ goal: z.string().min(1) });
export type AutonomyLoopInput = z.infer<typeof AutonomyLoopInput>;

export const AutonomyLoopState = AutonomyLoopInput.extend({
  value: AutonomyLoopStateName,
  planId: z.string().optional(),
  /** The plan's tasks as the planner gave them (the seed leaves their shape open). */
  tasks: z.array(z.json()).optional(),
  /** `task_completed`s accepted so far, across replans. */
  tasksCompleted: z.number().int().nonnegative(),
  /** The last critique's findings. */
  findings: z.json().optional(),
  /** The critic's summary when the goal was met. */
  summary: z.string().optional(),
  /** Why the loop stopped: the event's reason, else the event type. */
  reason: z.string().optional(),
});
export type AutonomyLoopState = z.infer<typeof AutonomyLoopState>;

/**
 * The events of the seed's diagram, plus `task_assigned` and `task_started`, which its rune table
 * requires in `executing`; payloads from its "Autonomy Events" table.
 */
export const AutonomyLoopEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('decompose_goal'), planId: z.string().min(1).optional(), tasks: z.array(z.json()).optional() }),
  z.object({ type: z.literal('plan_approved') }),
  z.object({ type: z.literal('auto_start') }),
  z.object({ type: z.literal('plan_rejected'), changes: z.json().optional() }),
  z.object({ type: z.literal('user_cancel'), reason: z.string().optional() }),
  z.object({ type: z.literal('all_tasks_terminal') }),
  z.object({ type: z.literal('task_assigned'), taskId: z.string().min(1), agentId: z.string().min(1) }),
  z.object({ type: z.literal('task_started'), taskId: z.string().min(1) }),
  z.object({
    type: z.literal('task_completed'),
    morePending: z.boolean(),
    taskId: z.string().min(1).optional(),
    result: z.json().optional(),
    evidence: z.json().optional(),
  }),
  z.object({ type: z.literal('all_runnable_blocked') }),
  z.object({ type: z.literal('budget_exhausted') }),
  z.object({ type: z.literal('critique_found_issues'), findings: z.json().optional() }),
  z.object({ type: z.literal('critique_passed'), summary: z.string().optional() }),
  z.object({ type: z.literal('needs_replan'), findings: z.json().optional() }),
  z.object({ type: z.literal('dependency_resolved') }),
  z.object({ type: z.literal('unresolvable'), reason: z.string().optional() }),
]);
export type AutonomyLoopEvent = z.infer<typeof AutonomyLoopEvent>;

const PlanId = z.string().optional();

/**
 * The payload of each rune kind of seed 003's "Autonomy Events" table, camelCase. The steps the
 * seed gives no kind (`plan_approved`, `auto_start`, `all_tasks_terminal`, `all_runnable_blocked`,
 * `dependency_resolved`) carry none.
 */
export const AutonomyLoopPayloads = {
  'plan.goal_received': z.object({ goalDescription: z.string() }),
  'plan.created': z.object({ planId: PlanId, tasks: z.array(z.json()).optional() }),
  /** A rejected plan: what the planner is to change. */
  'plan.updated': z.object({ planId: PlanId, changes: z.json().optional() }),
  'plan.task_assigned': z.object({ taskId: z.string(), agentId: z.string() }),
  'plan.task_started': z.object({ taskId: z.string() }),
  'plan.task_completed': z.object({ taskId: z.string().optional(), result: z.json().optional(), evidence: z.json().optional() }),
  'plan.critique': z.object({ planId: PlanId, findings: z.json().optional() }),
  'plan.goal_met': z.object({ planId: PlanId, summary: z.string().optional() }),
  /** The event's reason, else the event type (`user_cancel`, `budget_exhausted`, `unresolvable`). */
  'plan.stopped': z.object({ reason: z.string() }),
} as const;
