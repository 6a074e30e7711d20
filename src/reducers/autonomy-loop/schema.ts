import { z } from 'zod';
import { Usage } from '../budget.js';

/** Seed 003 "Autonomy Loop State Machine"; `goal_met` and `stopped` are terminal. */
export const AutonomyLoopStateName = z.enum(['goal_received', 'planning', 'executing', 'reviewing', 'blocked', 'goal_met', 'stopped']);
export type AutonomyLoopStateName = z.infer<typeof AutonomyLoopStateName>;

/** The most tasks a plan may have. */
export const MAX_PLAN_TASKS = 500;
/** The longest task description, result or reason kept in a plan's state, in characters. */
export const MAX_TASK_TEXT = 16_000;

/** A task id or role name: it becomes part of agent ids and stream ids, so letters, digits, `_`, `-`, `.`. */
const Name = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'must be 1 to 64 letters, digits, "_", "-" or "." (starting with a letter or digit)');

/**
 * One task of a plan, as the planner gives it: the single schema of the planner's structured
 * answer and of `decompose_goal` / `plan_revised`.
 */
export const PlanTask = z.strictObject({
  /** Unique in its plan. */
  id: Name,
  /** What the agent is to do: the input of its turn. */
  description: z.string().min(1).max(MAX_TASK_TEXT),
  /** Ids of the tasks whose results it needs: it runs once they are all done. */
  dependsOn: z.array(Name).max(MAX_PLAN_TASKS).default([]),
  /** Higher runs first among the runnable tasks. Default 0. */
  priority: z.number().int().min(-1000).max(1000).default(0),
  /** The role of the agent that runs it. */
  ownerRole: Name,
});
export type PlanTask = z.infer<typeof PlanTask>;
/** A task as a planner may write it (defaults not applied). */
export type PlanTaskInput = z.input<typeof PlanTask>;

/** A plan's tasks: 1 to {@link MAX_PLAN_TASKS}. */
export const PlanTasks = z.array(PlanTask).min(1).max(MAX_PLAN_TASKS);

/** Where a task is: waiting (`pending`), given to an agent (`assigned`), its turn under way (`running`), or ended. */
export const TaskStatus = z.enum(['pending', 'assigned', 'running', 'done', 'failed']);
export type TaskStatus = z.infer<typeof TaskStatus>;

/** What a task's turn left as proof: its turn stream, the seq range of the turn, its tool results. */
export const TaskEvidence = z.object({
  turn: z.string(),
  fromSeq: z.number().int().nonnegative(),
  toSeq: z.number().int().nonnegative(),
  toolResults: z.array(z.object({ callId: z.string(), toolName: z.string(), status: z.string(), output: z.json().optional() })).max(1000),
});
export type TaskEvidence = z.infer<typeof TaskEvidence>;

/** A task of the plan with where it is. */
export const TaskState = PlanTask.extend({
  status: TaskStatus,
  /** How many times it was assigned (each a run of it). */
  attempts: z.number().int().nonnegative(),
  /** The agent it is assigned to (while assigned or running, and after it ran). */
  agentId: z.string().optional(),
  /** The number of the agent's turn that runs it (its turn stream's `turn`). */
  turnNumber: z.number().int().positive().optional(),
  /** Its last run's final output (success) or error (failure). */
  result: z.string().optional(),
  evidence: TaskEvidence.optional(),
});
export type TaskState = z.infer<typeof TaskState>;

/** The `plan.goal_received` rune's payload (the seed's `goal_description`). */
export const AutonomyLoopInput = z.object({ goal: z.string().min(1).max(MAX_TASK_TEXT) });
export type AutonomyLoopInput = z.infer<typeof AutonomyLoopInput>;

export const AutonomyLoopState = AutonomyLoopInput.extend({
  value: AutonomyLoopStateName,
  planId: z.string().optional(),
  /** The plan's tasks, each with its status. */
  tasks: z.array(TaskState),
  /** `task_completed`s accepted so far, across replans. */
  tasksCompleted: z.number().int().nonnegative(),
  /** `plan_rejected`s so far: each asks the planner again. */
  revisions: z.number().int().nonnegative(),
  /** `needs_replan`s so far. */
  replans: z.number().int().nonnegative(),
  /** In `planning` after `needs_replan`: the planner is revising the plan (no approval until `plan_revised`). */
  replanning: z.boolean().optional(),
  /** What the client asked to change when it rejected the plan. */
  changes: z.json().optional(),
  /** The last critique's findings. */
  findings: z.json().optional(),
  /** The critic's summary when the goal was met. */
  summary: z.string().optional(),
  /** Why the loop stopped: the event's reason, else the event type. */
  reason: z.string().optional(),
  /**
   * The model answers refused for the question the planner or critic is asked now (`question`):
   * how many, and the last one's error. Durable, so a restart goes on counting toward `maxPlannerAttempts`.
   */
  refused: z.object({ question: z.string(), attempts: z.number().int().positive(), error: z.string() }).optional(),
  /** The conversation's usage when the plan first executed (with a `budget`): the plan's budget counts only what was used since. */
  usageAtStart: Usage.optional(),
});
export type AutonomyLoopState = z.infer<typeof AutonomyLoopState>;

const Reason = z.string().max(MAX_TASK_TEXT);

/**
 * The events of the seed's diagram, plus `task_assigned` and `task_started`, which its rune table
 * requires in `executing`; payloads from its "Autonomy Events" table. Extensions: `plan_revised`
 * (the planner's new plan after `needs_replan`), `planner_failed`, `retry_task` (an operator's,
 * in `blocked`).
 */
export const AutonomyLoopEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('decompose_goal'), planId: z.string().min(1).max(128), tasks: PlanTasks }),
  z.object({ type: z.literal('plan_revised'), tasks: PlanTasks, changes: z.json().optional() }),
  z.object({ type: z.literal('planner_failed'), reason: Reason }),
  z.object({ type: z.literal('plan_approved') }),
  z.object({ type: z.literal('auto_start') }),
  z.object({ type: z.literal('plan_rejected'), changes: z.json().optional() }),
  z.object({ type: z.literal('user_cancel'), reason: Reason.optional() }),
  z.object({ type: z.literal('all_tasks_terminal') }),
  z.object({ type: z.literal('task_assigned'), taskId: z.string().min(1), agentId: z.string().min(1) }),
  z.object({ type: z.literal('task_started'), taskId: z.string().min(1), turnNumber: z.number().int().positive() }),
  z.object({
    type: z.literal('task_completed'),
    taskId: z.string().min(1),
    outcome: z.enum(['success', 'failure']),
    /** The turn's final output (success), or why it failed. */
    result: z.string().max(MAX_TASK_TEXT),
    evidence: TaskEvidence.optional(),
    /** The seed's label; not needed (`all_tasks_terminal` is what moves on). */
    morePending: z.boolean().optional(),
  }),
  z.object({ type: z.literal('all_runnable_blocked') }),
  z.object({ type: z.literal('budget_exhausted'), reason: Reason.optional() }),
  /** `retry`: the tasks to run again (they become pending). */
  z.object({ type: z.literal('critique_found_issues'), findings: z.json().optional(), retry: z.array(z.string().min(1)).min(1).max(MAX_PLAN_TASKS) }),
  z.object({ type: z.literal('critique_passed'), summary: Reason.optional() }),
  z.object({ type: z.literal('needs_replan'), findings: z.json().optional() }),
  z.object({ type: z.literal('retry_task'), taskId: z.string().min(1) }),
  z.object({ type: z.literal('dependency_resolved') }),
  z.object({ type: z.literal('unresolvable'), reason: Reason.optional() }),
  /** The conversation's usage as the plan starts executing: its budget counts from there. */
  z.object({ type: z.literal('budget_started'), usage: Usage }),
  /**
   * A planner's or critic's answer refused (its schema, a cycle, a call that failed), the model to
   * be asked again: `question` names what it was asked (`plan@0`, `replan@1`, `review@0.3`).
   */
  z.object({ type: z.literal('answer_refused'), question: z.string().min(1).max(128), error: Reason }),
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
  'plan.created': z.object({ planId: PlanId, tasks: z.array(PlanTask) }),
  /** A rejected plan (what the planner is to change), or a revised one after a replan (its tasks). */
  'plan.updated': z.object({ planId: PlanId, changes: z.json().optional(), tasks: z.array(PlanTask).optional() }),
  'plan.task_assigned': z.object({ taskId: z.string(), agentId: z.string() }),
  'plan.task_started': z.object({ taskId: z.string(), turnNumber: z.number().optional() }),
  'plan.task_completed': z.object({ taskId: z.string(), outcome: z.enum(['success', 'failure']), result: z.string(), evidence: TaskEvidence.optional() }),
  'plan.critique': z.object({ planId: PlanId, findings: z.json().optional(), retry: z.array(z.string()).optional() }),
  'plan.goal_met': z.object({ planId: PlanId, summary: z.string().optional() }),
  /** The event's reason, else the event type (`user_cancel`, `budget_exhausted`, `unresolvable`). */
  'plan.stopped': z.object({ reason: z.string() }),
  /** An operator asked to run a failed task again. */
  'plan.task_retried': z.object({ taskId: z.string() }),
  /** The conversation's usage as the plan started executing: its budget's zero. */
  'plan.budget_started': z.object({ usage: Usage }),
  /** A planner's or critic's answer refused: which question, which attempt, why. */
  'plan.answer_refused': z.object({ question: z.string(), attempt: z.number(), error: z.string() }),
} as const;
