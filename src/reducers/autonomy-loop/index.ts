export {
  AutonomyLoopEvent,
  AutonomyLoopInput,
  AutonomyLoopPayloads,
  AutonomyLoopState,
  AutonomyLoopStateName,
  MAX_PLAN_TASKS,
  MAX_TASK_TEXT,
  PlanTask,
  PlanTasks,
  TaskEvidence,
  TaskState,
  TaskStatus,
  type PlanTaskInput,
} from './schema.js';
export { autonomyLoop } from './machine.js';
export { allRunnableBlocked, allTasksTerminal, isTaskActive, isTaskTerminal, planProblem, runnableTasks } from './tasks.js';
