import type { Epic } from '../../streams/epic.js';
import { resolveAutonomyOptions, type AutonomyOptions } from './autonomy-options.js';
import { autonomyCritic } from './critic.js';
import { autonomyBudget } from './plan-budget.js';
import { autonomyPlanner } from './planner.js';
import { autonomyStall } from './plan-stall.js';
import { autonomyScheduler } from './scheduler.js';

/**
 * The autonomy loop of seed 003, run: a goal given to a conversation (an `autonomy-loop` stream
 * `conv/<c>/plan/<p>`, see `planStream`) is planned by the planner model, executed by the
 * conversation's agents, reviewed by the critic and finished, every step a rune. Its epics, each
 * an effect of the plan's state (so a restart resumes them): `autonomyPlanner`,
 * `autonomyScheduler`, `autonomyCritic`, `autonomyBudget`, `autonomyStall`. The agents are `agentEpics`': pass both.
 *
 * ## Example
 * ```ts
 * import { filter, firstValueFrom } from 'rxjs';
 * import { createEngine, planStream, type AutonomyLoopState } from 'runestream';
 * import { agentEpics, autonomyEpics, scriptedModel } from 'runestream/agents';
 *
 * const planner = scriptedModel([{ text: JSON.stringify({ tasks: [{ id: 'greet', description: 'Say hello', ownerRole: 'writer' }] }) }]);
 * const critic = scriptedModel([{ text: '{"verdict":"pass","summary":"greeted"}' }]);
 * const writer = scriptedModel([{ text: 'Hello!' }]);
 * const engine = createEngine({ epics: [...agentEpics({ model: writer }), ...autonomyEpics({ planner, critic, autoStart: true })] });
 * const plan = planStream('c1', 'p1');
 * await engine.spawn(plan, 'autonomy-loop', { goal: 'Greet the user' });
 * const met = firstValueFrom(engine.state$<AutonomyLoopState>(plan).pipe(filter((s) => s.value === 'goal_met')));
 * const { tasks, summary } = await met;
 * console.log(tasks[0]?.status, tasks[0]?.agentId, JSON.stringify(tasks[0]?.result), summary);
 * // Logs: done writer-1 "Hello!" greeted
 * await engine.close();
 * ```
 */
export function autonomyEpics(options: AutonomyOptions): Epic[] {
  resolveAutonomyOptions(options); // a bad option fails here, naming it
  return [autonomyPlanner(options), autonomyScheduler(options), autonomyCritic(options), autonomyBudget(options), autonomyStall(options)];
}
