import { from, merge, mergeMap, throwError, timer, type Observable, type SchedulerLike } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { autonomyEpics, type AutonomyOptions, type StructuredCaller } from '../../../src/agents.js';
import { agentModel } from '../../../src/effects/agent/agent-model.js';
import { agentTurns } from '../../../src/effects/agent/agent-turns.js';
import type { ChainOutput, ModelRequest } from '../../../src/effects/llm/model-types.js';
import { planStream, type AutonomyLoopState, type Epic, type EpicCommand, type PlanTaskInput, type Rune } from '../../../src/index.js';
import { machineWorld, playEpic } from '../../support/frames.js';

/**
 * The autonomy loop under virtual time, with no runtime: a log in memory played by the real
 * machines (`machineWorld`), the loop's epics with the agents' (`agentModel`, `agentTurns`) played
 * on its virtual clock (`playEpic`), and every model (planner, critic, workers) a caller that
 * answers after a virtual delay. `drive` is the engine's part: it applies the epics' commands and
 * sends their runes back, and moves the clock to the next timer when all is quiet.
 */

const PLAN = planStream('c1', 'p1');
const ROOT = 'conv/c1';
const SECOND = 1000;
const task = (id: string, dependsOn: string[] = []): PlanTaskInput => ({ id, description: `do ${id}`, dependsOn, priority: 0, ownerRole: 'dev' });

const text = (t: string): ChainOutput => ({ type: 'part', part: { type: 'text-delta', text: t } });
const finish = (usage?: Record<string, number>): ChainOutput => ({ type: 'part', part: { type: 'finish', finishReason: 'stop', ...(usage === undefined ? {} : { usage }) } });

/** A model answering after `delay` virtual ms: `answer(request, n)` is call n's text, or an Error for a failed call. */
function modelAfter(scheduler: SchedulerLike, delay: number, answer: (request: ModelRequest, n: number) => string | Error, usage?: Record<string, number>) {
  const requests: ModelRequest[] = [];
  const call: StructuredCaller = (request) => {
    requests.push(request);
    const said = answer(request, requests.length);
    const parts$: Observable<ChainOutput> = said instanceof Error ? throwError(() => said) : from([text(said), finish(usage)]);
    return timer(delay, scheduler).pipe(mergeMap(() => parts$));
  };
  return { call, requests };
}

/** The task a worker's request is about: its last user message (the turn's prompt) names it. */
const taskOf = (request: ModelRequest): string => {
  const prompt = request.messages.filter((message) => message.role === 'user').at(-1)?.content;
  return /Task "([^"]+)"/.exec(typeof prompt === 'string' ? prompt : '')?.[1] ?? '?';
};

/** The plan's runes as `kind@second` while the planner answers (0-1 s) and the first task's turn runs (1-3 s). */
const FIRST_TASK_RAN = ['plan.goal_received@0', 'plan.created@1', 'auto_start@1', 'plan.task_assigned@1', 'plan.task_started@1', 'plan.task_completed@3'];

const ended = (value: string | undefined): boolean => value === 'goal_met' || value === 'stopped';

/** A loop in a world: the plan spawned, the epics playing; `drive` runs it until the plan ends (or nothing more can happen). */
function loopWorld(
  w: ReturnType<typeof machineWorld>,
  options: Omit<AutonomyOptions, 'planner'> & { planner: StructuredCaller; worker: StructuredCaller },
  epics: (options: AutonomyOptions) => Epic[] = autonomyEpics,
) {
  const { worker, ...loop } = options;
  const all = [...epics({ autoStart: true, ...loop }), agentModel({ call: worker }), agentTurns()];
  const epic: Epic = (runes$, context, deps) => merge(...all.map((each) => each(runes$, context, deps)));
  const runes: Rune[] = [w.spawn(PLAN, 'autonomy-loop', { goal: 'ship it' })];
  const play = playEpic(epic, w.context(), w.scheduler);
  let until: (value: string | undefined) => boolean = ended;
  const apply = async (commands: EpicCommand[]): Promise<void> => {
    for (let pending = commands; ; ) {
      if (pending.length === 0) {
        const next = Math.min(...w.scheduler.actions.map((action) => action.delay));
        if (until(w.value(PLAN)) || !Number.isFinite(next)) return;
        w.scheduler.frame = next;
        pending = await play.send();
        continue;
      }
      const applied = w.run(pending);
      runes.push(...applied);
      pending = await play.send(...applied);
    }
  };
  return {
    w,
    runes,
    /** Runs the loop until the plan is in a state `stopAt` accepts (default: ended), or nothing more can happen. */
    drive: async (stopAt = ended) => {
      until = stopAt;
      await apply(await play.send());
    },
    /** Sends a client's event to the plan, then drives on until the plan ends. */
    dispatch: async (event: Rune['event']) => {
      until = ended;
      const rune = w.dispatch(PLAN, event);
      runes.push(rune);
      await apply(await play.send(rune));
    },
    /** The plan's runes as `kind@second`. */
    plan: () => runes.filter((rune) => rune.stream === PLAN).map((rune) => `${rune.kind}@${rune.at / SECOND}`),
    state: () => w.state<AutonomyLoopState>(PLAN)!,
  };
}

describe('the autonomy loop under virtual time', () => {
  it('goal -> plan -> tasks run in dependency order -> review -> goal_met, every rune in order at its virtual time', async () => {
    const w = machineWorld();
    const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a'), task('b', ['a'])] }));
    const critic = modelAfter(w.scheduler, SECOND, () => '{"verdict":"pass","summary":"shipped"}');
    const worker = modelAfter(w.scheduler, 2 * SECOND, (request) => `done ${taskOf(request)}`);
    const loop = loopWorld(w, { planner: planner.call, critic: critic.call, worker: worker.call });
    await loop.drive();
    expect(loop.state().value).toBe('goal_met');
    // Planner at 0-1 s, a's turn 1-3 s, b's 3-5 s, the critic 5-6 s.
    expect(loop.plan()).toEqual([...FIRST_TASK_RAN, 'plan.task_assigned@3', 'plan.task_started@3', 'plan.task_completed@5', 'all_tasks_terminal@5', 'plan.goal_met@6']);
    expect(loop.state().tasks.map((t) => [t.id, t.status, t.agentId, t.result])).toEqual([
      ['a', 'done', 'dev-1', 'done a'],
      ['b', 'done', 'dev-1', 'done b'],
    ]);
    expect(loop.state().summary).toBe('shipped');
    expect(worker.requests.map(taskOf)).toEqual(['a', 'b']);
    expect(JSON.stringify(worker.requests[1]!.messages)).toContain('- a: done a');
  });
});

describe('the scheduler under virtual time', () => {
  it('runnable tasks are assigned to agents of their role (spawned), up to the parallelism, and their turns start at once; a dependent task waits', async () => {
    const w = machineWorld();
    const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a'), task('b'), task('c', ['a', 'b'])] }));
    const critic = modelAfter(w.scheduler, SECOND, () => '{"verdict":"pass","summary":"shipped"}');
    const worker = modelAfter(w.scheduler, 2 * SECOND, (request) => `done ${taskOf(request)}`);
    const loop = loopWorld(w, { planner: planner.call, critic: critic.call, worker: worker.call, parallelism: 2 });
    await loop.drive();
    const assigned = loop.runes.filter((rune) => rune.kind === 'plan.task_assigned').map((rune) => [rune.payload, rune.at / SECOND]);
    expect(assigned).toEqual([
      [{ taskId: 'a', agentId: 'dev-1' }, 1],
      [{ taskId: 'b', agentId: 'dev-2' }, 1],
      [{ taskId: 'c', agentId: 'dev-1' }, 3],
    ]);
    const turns = loop.runes.filter((rune) => rune.machine === 'turn-engine' && rune.kind === 'turn.started').map((rune) => [rune.stream, rune.at / SECOND]);
    expect(turns).toEqual([
      ['conv/c1/agent/dev-1/turn', 1],
      ['conv/c1/agent/dev-2/turn', 1],
      ['conv/c1/agent/dev-1/turn', 3],
    ]);
    expect(loop.runes.filter((rune) => rune.kind === 'agent.spawning').map((rune) => rune.event.input)).toEqual([
      { agentId: 'dev-1', role: 'dev' },
      { agentId: 'dev-2', role: 'dev' },
    ]);
    expect(loop.plan().at(-1)).toBe('plan.goal_met@6');
  });

  it('a failed dependency blocks the plan; with no retry_task, blockedTimeoutMs later it stops (unresolvable)', async () => {
    const w = machineWorld();
    const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a'), task('b', ['a'])] }));
    const worker = modelAfter(w.scheduler, 2 * SECOND, () => new Error('HTTP 500: a broke'));
    const loop = loopWorld(w, { planner: planner.call, worker: worker.call, blockedTimeoutMs: 60 * SECOND });
    await loop.drive();
    expect(loop.plan()).toEqual([...FIRST_TASK_RAN, 'all_runnable_blocked@3', 'plan.stopped@63']);
    expect(loop.state().reason).toBe('blocked: "b" (on a) wait on failed tasks; no retry_task within 60000 ms (blockedTimeoutMs)');
    expect(worker.requests).toHaveLength(1);
  });

  it("a blocked plan unblocked by an operator's retry_task 10 s later runs on and meets its goal", async () => {
    const w = machineWorld();
    const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a'), task('b', ['a'])] }));
    const critic = modelAfter(w.scheduler, SECOND, () => '{"verdict":"pass","summary":"shipped"}');
    const worker = modelAfter(w.scheduler, 2 * SECOND, (request, n) => (n === 1 ? new Error('HTTP 500: a broke') : `done ${taskOf(request)}`));
    const loop = loopWorld(w, { planner: planner.call, critic: critic.call, worker: worker.call, blockedTimeoutMs: 60 * SECOND });
    await loop.drive((value) => value === 'blocked');
    w.scheduler.frame = 13 * SECOND;
    await loop.dispatch({ type: 'retry_task', taskId: 'a' });
    expect(loop.plan().slice(6)).toEqual([
      'all_runnable_blocked@3',
      'plan.task_retried@13',
      'dependency_resolved@13',
      'plan.task_assigned@13',
      'plan.task_started@13',
      'plan.task_completed@15',
      'plan.task_assigned@15',
      'plan.task_started@15',
      'plan.task_completed@17',
      'all_tasks_terminal@17',
      'plan.goal_met@18',
    ]);
    expect(loop.state().tasks.map((t) => [t.id, t.status, t.attempts])).toEqual([
      ['a', 'done', 2],
      ['b', 'done', 1],
    ]);
  });
});

describe('review under virtual time', () => {
  it('a failed task is retried after the critique (plan.critique), and the second review passes', async () => {
    const w = machineWorld();
    const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a')] }));
    const critic = modelAfter(w.scheduler, SECOND, (_, n) => (n === 1 ? '{"verdict":"retry","findings":"a broke","tasks":["a"]}' : '{"verdict":"pass","summary":"fixed"}'));
    const worker = modelAfter(w.scheduler, 2 * SECOND, (request, n) => (n === 1 ? new Error('HTTP 500: a broke') : `done ${taskOf(request)}`));
    const loop = loopWorld(w, { planner: planner.call, critic: critic.call, worker: worker.call });
    await loop.drive();
    expect(loop.plan()).toEqual([
      ...FIRST_TASK_RAN,
      'all_tasks_terminal@3',
      'plan.critique@4',
      'plan.task_assigned@4',
      'plan.task_started@4',
      'plan.task_completed@6',
      'all_tasks_terminal@6',
      'plan.goal_met@7',
    ]);
    expect(loop.state().tasks[0]).toMatchObject({ id: 'a', status: 'done', attempts: 2, result: 'done a' });
    expect(JSON.stringify(critic.requests[0]!.messages)).toContain('the turn failed: HTTP 500: a broke');
  });

  it('a replan: the critic sends the plan back, the planner revises it (plan.updated), a done task kept is not run again', async () => {
    const w = machineWorld();
    const planner = modelAfter(w.scheduler, SECOND, (_, n) => JSON.stringify({ tasks: n === 1 ? [task('a'), task('b', ['a'])] : [task('a'), task('c', ['a'])] }));
    const critic = modelAfter(w.scheduler, SECOND, (_, n) => (n === 1 ? '{"verdict":"replan","findings":"b is the wrong approach"}' : '{"verdict":"pass","summary":"done"}'));
    const worker = modelAfter(w.scheduler, 2 * SECOND, (request) => `done ${taskOf(request)}`);
    const loop = loopWorld(w, { planner: planner.call, critic: critic.call, worker: worker.call });
    await loop.drive();
    expect(loop.plan().slice(9)).toEqual([
      'all_tasks_terminal@5',
      'plan.critique@6',
      'plan.updated@7',
      'auto_start@7',
      'plan.task_assigned@7',
      'plan.task_started@7',
      'plan.task_completed@9',
      'all_tasks_terminal@9',
      'plan.goal_met@10',
    ]);
    expect(worker.requests.map(taskOf)).toEqual(['a', 'b', 'c']);
    expect(JSON.stringify(planner.requests[1]!.messages)).toContain('b is the wrong approach');
  });
});

describe('the plan budget under virtual time', () => {
  const budgetRun = (w: ReturnType<typeof machineWorld>) => {
    const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a'), task('b', ['a']), task('c', ['b'])] }));
    const worker = modelAfter(w.scheduler, 2 * SECOND, (request) => `done ${taskOf(request)}`, { inputTokens: 5, outputTokens: 10 });
    return { worker, loop: loopWorld(w, { planner: planner.call, worker: worker.call, budget: { outputTokens: 20 } }) };
  };

  it("the conversation's usage reaching the budget stops the plan (budget_exhausted) after the turn that used it up; c never starts", async () => {
    const w = machineWorld();
    const { loop, worker } = budgetRun(w);
    await loop.drive();
    expect(loop.plan()).toEqual([
      'plan.goal_received@0',
      'plan.created@1',
      'auto_start@1',
      'plan.task_assigned@1',
      'plan.budget_started@1',
      'plan.task_started@1',
      'plan.task_completed@3',
      'plan.task_assigned@3',
      'plan.task_started@3',
      'plan.task_completed@5',
      'plan.stopped@5',
    ]);
    expect(loop.state().reason).toBe('budget: outputTokens 20 of 20');
    expect(worker.requests.map(taskOf)).toEqual(['a', 'b']);
  });

  it("usage of the conversation from before the plan does not count: the budget's zero is recorded as the plan starts (plan.budget_started)", async () => {
    const w = machineWorld();
    w.spawn(ROOT, 'conversation', { conversationId: 'c1' });
    w.dispatch(ROOT, { type: 'agent_ready' });
    const before = { inputTokens: 50, outputTokens: 100, modelCalls: 3, toolCalls: 0, wallClockMs: 0 };
    w.dispatch(ROOT, { type: 'turn_completed', usage: before });
    const { loop, worker } = budgetRun(w);
    await loop.drive();
    expect(loop.runes.find((rune) => rune.kind === 'plan.budget_started')?.payload).toEqual({ usage: before });
    expect(loop.state()).toMatchObject({ value: 'stopped', reason: 'budget: outputTokens 20 of 20', usageAtStart: before });
    expect(worker.requests.map(taskOf)).toEqual(['a', 'b']);
  });
});
