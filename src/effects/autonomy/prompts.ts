import type { AutonomyLoopState, TaskState } from '../../reducers/autonomy-loop/schema.js';
import type { ModelRequest } from '../llm/model-types.js';

/** How much of a result a prompt quotes. */
const QUOTED_CHARS = 2000;
const quote = (text: string | undefined): string => {
  const value = text ?? '';
  return value.length > QUOTED_CHARS ? `${value.slice(0, QUOTED_CHARS - 1)}…` : value;
};

const PLANNER_SYSTEM = [
  'You plan work for a team of agents. Break the goal into tasks.',
  'Answer with JSON only, in this shape:',
  '{"tasks":[{"id":"a","description":"what to do","dependsOn":[],"priority":0,"ownerRole":"role"}]}',
  'ids: letters, digits, "_", "-", "."; dependsOn: ids of tasks whose results it needs (no cycles); priority: higher runs first.',
].join('\n');

const CRITIC_SYSTEM = [
  "You review the results of a plan's tasks against its goal.",
  'Answer with JSON only, one of:',
  '{"verdict":"pass","summary":"what was achieved"}',
  '{"verdict":"retry","findings":"what is wrong","tasks":["ids of tasks to run again"]}',
  '{"verdict":"replan","findings":"why the plan itself must change"}',
].join('\n');

/** A plan's tasks as lines for a prompt: id, status, role, and the result when there is one. */
const taskLines = (tasks: readonly TaskState[]): string =>
  tasks
    .map((task) => `- ${task.id} [${task.status}, ${task.ownerRole}]: ${task.description}${task.result === undefined ? '' : `\n  result: ${quote(task.result)}`}`)
    .join('\n');

/** The planner's request: the goal, the roles, and what to change (a client's rejection, or the critic's findings on a replan). */
export function plannerRequest(plan: AutonomyLoopState, roles: Readonly<Record<string, { readonly description?: string }>> | undefined): ModelRequest {
  const parts = [`Goal: ${plan.goal}`];
  if (roles !== undefined)
    parts.push(
      `Roles (ownerRole must be one of them):\n${Object.entries(roles)
        .map(([role, { description }]) => `- ${role}${description === undefined ? '' : `: ${description}`}`)
        .join('\n')}`,
    );
  if (plan.value === 'goal_received' && plan.changes !== undefined) parts.push(`The last plan was rejected. Change: ${JSON.stringify(plan.changes)}`);
  if (plan.replanning === true) {
    parts.push(`The plan so far:\n${taskLines(plan.tasks)}`);
    parts.push(`The review asks for a new plan: ${JSON.stringify(plan.findings ?? null)}`);
    parts.push('Tasks that are done and kept with the same id and description are not run again.');
  }
  return { system: PLANNER_SYSTEM, messages: [{ role: 'user', content: parts.join('\n\n') }], tools: {} };
}

/** The critic's request: the goal and every task with its result. */
export function criticRequest(plan: AutonomyLoopState): ModelRequest {
  return { system: CRITIC_SYSTEM, messages: [{ role: 'user', content: `Goal: ${plan.goal}\n\nTasks:\n${taskLines(plan.tasks)}` }], tools: {} };
}

/** The input of a task's turn: its description, the goal it serves, and the results of the tasks it depends on. */
export function taskPrompt(plan: Pick<AutonomyLoopState, 'goal' | 'tasks'>, task: TaskState): string {
  const dependencies = task.dependsOn.map((id) => plan.tasks.find((each) => each.id === id)).filter((each) => each !== undefined);
  const results = dependencies.length === 0 ? '' : `\n\nResults of the tasks it depends on:\n${dependencies.map((each) => `- ${each.id}: ${quote(each.result)}`).join('\n')}`;
  return `${task.description}\n\n(Task "${task.id}" of a plan for the goal: ${plan.goal})${results}`;
}
