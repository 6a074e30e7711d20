import type { PlanTask, TaskState, TaskStatus } from './schema.js';

/** Whether a task has ended, well or not. */
export const isTaskTerminal = (task: Pick<TaskState, 'status'>): boolean => task.status === 'done' || task.status === 'failed';

/** Whether a task is with an agent (assigned, or its turn under way). */
export const isTaskActive = (task: Pick<TaskState, 'status'>): boolean => task.status === 'assigned' || task.status === 'running';

/**
 * Why a plan cannot run, or `undefined`: a duplicate id, a dependency on an unknown task, or a
 * dependency cycle, named as the path that closes it (`a -> b -> a`).
 */
export function planProblem(tasks: readonly Pick<PlanTask, 'id' | 'dependsOn'>[]): string | undefined {
  const byId = new Map<string, Pick<PlanTask, 'id' | 'dependsOn'>>();
  for (const task of tasks) {
    if (byId.has(task.id)) return `task id "${task.id}" appears twice`;
    byId.set(task.id, task);
  }
  for (const task of tasks) {
    for (const dependency of task.dependsOn) if (!byId.has(dependency)) return `task "${task.id}" depends on "${dependency}", which is not a task of the plan`;
  }
  // Depth-first, colouring: a task met again while on the path closes a cycle.
  const done = new Set<string>();
  const path: string[] = [];
  const onPath = new Set<string>();
  const visit = (id: string): string | undefined => {
    if (done.has(id)) return undefined;
    if (onPath.has(id)) return [...path.slice(path.indexOf(id)), id].join(' -> ');
    onPath.add(id);
    path.push(id);
    for (const dependency of byId.get(id)!.dependsOn) {
      const cycle = visit(dependency);
      if (cycle !== undefined) return cycle;
    }
    path.pop();
    onPath.delete(id);
    done.add(id);
    return undefined;
  };
  for (const task of tasks) {
    const cycle = visit(task.id);
    if (cycle !== undefined) return `the plan has a dependency cycle: ${cycle}`;
  }
  return undefined;
}

/** A plan's tasks as fresh state: pending, never run. */
export const pendingTasks = (tasks: readonly PlanTask[]): TaskState[] => tasks.map((task) => ({ ...task, status: 'pending', attempts: 0 }));

/**
 * A revised plan's tasks: a task the old plan had done, with the same id and description, stays
 * done with its result (it is not run again); every other task is pending.
 */
export function revisedTasks(old: readonly TaskState[], tasks: readonly PlanTask[]): TaskState[] {
  const doneBefore = new Map(old.filter((task) => task.status === 'done').map((task) => [task.id, task]));
  return tasks.map((task) => {
    const before = doneBefore.get(task.id);
    return before !== undefined && before.description === task.description ? { ...before, ...task } : { ...task, status: 'pending', attempts: 0 };
  });
}

/**
 * The pending tasks whose dependencies are all done, highest priority first (ties in plan order):
 * what the scheduler assigns next.
 */
export function runnableTasks(tasks: readonly TaskState[]): TaskState[] {
  const status = new Map<string, TaskStatus>(tasks.map((task) => [task.id, task.status]));
  return tasks
    .map((task, index) => ({ task, index }))
    .filter(({ task }) => task.status === 'pending' && task.dependsOn.every((id) => status.get(id) === 'done'))
    .sort((a, b) => b.task.priority - a.task.priority || a.index - b.index)
    .map(({ task }) => task);
}

/** Whether every task has ended. */
export const allTasksTerminal = (tasks: readonly TaskState[]): boolean => tasks.every(isTaskTerminal);

/** Nothing runnable, nothing with an agent, and not every task ended: the failed dependencies block the rest. */
export const allRunnableBlocked = (tasks: readonly TaskState[]): boolean => !allTasksTerminal(tasks) && !tasks.some(isTaskActive) && runnableTasks(tasks).length === 0;

/** `tasks` with task `id` changed by `change`. */
export const updateTask = (tasks: readonly TaskState[], id: string, change: (task: TaskState) => TaskState): TaskState[] =>
  tasks.map((task) => (task.id === id ? change(task) : task));

/** The task `id`, if the plan has it. */
export const taskOf = (tasks: readonly TaskState[], id: string): TaskState | undefined => tasks.find((task) => task.id === id);
