import { from, merge, mergeMap, take, throwError, timer, type Observable, type SchedulerLike } from 'rxjs';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { autonomyEpics, defineTool, type AutonomyOptions, type StructuredCaller } from '../../../src/agents.js';
import { agentModel } from '../../../src/effects/agent/agent-model.js';
import { agentTurns } from '../../../src/effects/agent/agent-turns.js';
import type { ChainOutput, ModelRequest } from '../../../src/effects/llm/model-types.js';
import { toolCallEffects } from '../../../src/effects/tools/tool-call-effects.js';
import { agentStreams, planStream, type AutonomyLoopState, type Epic, type EpicCommand, type PlanTaskInput, type Rune } from '../../../src/index.js';
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
  others: readonly Epic[] = [],
) {
  const { worker, ...loop } = options;
  const all = [...epics({ autoStart: true, ...loop }), agentModel({ call: worker }), agentTurns(), ...others];
  const epic: Epic = (runes$, context, deps) => merge(...all.map((each) => each(runes$, context, deps)));
  const runes: Rune[] = [w.spawn(PLAN, 'autonomy-loop', { goal: 'ship it' })];
  let play = playEpic(epic, w.context(), w.scheduler);
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
    /** Sends a client's event to the plan (or to `stream`), then drives on until the plan ends. */
    dispatch: async (event: Rune['event'], stream = PLAN) => {
      until = ended;
      const rune = w.dispatch(stream, event);
      runes.push(rune);
      await apply(await play.send(rune));
    },
    /** A restart: the epics die with their process (every effect, timer and in-memory note) and fresh ones resume from the log. */
    restart: (epics: readonly Epic[] = all) => {
      play.stop();
      play = playEpic((runes$, context, deps) => merge(...epics.map((each) => each(runes$, context, deps))), w.context(), w.scheduler);
    },
    /** The plan's runes as `kind@second`. */
    plan: () => runes.filter((rune) => rune.stream === PLAN).map((rune) => `${rune.kind}@${rune.at / SECOND}`),
    state: () => w.state<AutonomyLoopState>(PLAN)!,
  };
}

/** The agents the plan's tasks were given, in order. */
const assignedAgents = (runes: readonly Rune[]): string[] =>
  runes.filter((rune) => rune.kind === 'plan.task_assigned').map((rune) => (rune.payload as { agentId: string }).agentId);
const spawnedAgents = (runes: readonly Rune[]): unknown[] => runes.filter((rune) => rune.kind === 'agent.spawning').map((rune) => rune.event.input);

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
  // Parallelism 1 is issue 28 (a): the retry waited for ever on the agent its first run had held.
  it.each([4, 1])(
    'a failed task is retried after the critique (plan.critique) on the idle agent that ran it, and the second review passes (parallelism %i)',
    async (parallelism) => {
      const w = machineWorld();
      const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a')] }));
      const critic = modelAfter(w.scheduler, SECOND, (_, n) => (n === 1 ? '{"verdict":"retry","findings":"a broke","tasks":["a"]}' : '{"verdict":"pass","summary":"fixed"}'));
      const worker = modelAfter(w.scheduler, 2 * SECOND, (request, n) => (n === 1 ? new Error('HTTP 500: a broke') : `done ${taskOf(request)}`));
      const loop = loopWorld(w, { planner: planner.call, critic: critic.call, worker: worker.call, parallelism });
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
      expect(assignedAgents(loop.runes)).toEqual(['dev-1', 'dev-1']);
      expect(JSON.stringify(critic.requests[0]!.messages)).toContain('the turn failed: HTTP 500: a broke');
    },
  );

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
      'plan.budget_started@1',
      'plan.task_assigned@1',
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
    // An agent of the conversation that ran a turn before the plan: the conversation's usage is its agents'.
    const earlier = `${ROOT}/agent/earlier`;
    w.spawn(earlier, 'agent-lifecycle', { agentId: 'earlier' });
    w.dispatch(earlier, { type: 'init_complete' });
    w.dispatch(earlier, { type: 'turn_assigned', turnId: '1' });
    w.dispatch(earlier, { type: 'turn_completed', usage: before });
    const { loop, worker } = budgetRun(w);
    await loop.drive();
    expect(loop.runes.find((rune) => rune.kind === 'plan.budget_started')?.payload).toEqual({ usage: before });
    expect(loop.state()).toMatchObject({ value: 'stopped', reason: 'budget: outputTokens 20 of 20', usageAtStart: before });
    expect(worker.requests.map(taskOf)).toEqual(['a', 'b']);
  });
});

describe('issue 28 (a): a task run again meets an idle agent of its role', () => {
  it("parallelism 1: an operator's retry_task of a failed task runs it again on the same idle agent", async () => {
    const w = machineWorld();
    const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a'), task('b', ['a'])] }));
    const critic = modelAfter(w.scheduler, SECOND, () => '{"verdict":"pass","summary":"shipped"}');
    const worker = modelAfter(w.scheduler, 2 * SECOND, (request, n) => (n === 1 ? new Error('HTTP 500: a broke') : `done ${taskOf(request)}`));
    const loop = loopWorld(w, { planner: planner.call, critic: critic.call, worker: worker.call, parallelism: 1, blockedTimeoutMs: 60 * SECOND });
    await loop.drive((value) => value === 'blocked');
    w.scheduler.frame = 13 * SECOND;
    await loop.dispatch({ type: 'retry_task', taskId: 'a' });
    expect(loop.state().value).toBe('goal_met');
    expect(loop.plan().slice(7, 12)).toEqual(['plan.task_retried@13', 'dependency_resolved@13', 'plan.task_assigned@13', 'plan.task_started@13', 'plan.task_completed@15']);
    expect(assignedAgents(loop.runes)).toEqual(['dev-1', 'dev-1', 'dev-1']);
    expect(spawnedAgents(loop.runes)).toEqual([{ agentId: 'dev-1', role: 'dev' }]);
  });

  it('parallelism 2: a task the critic sends back twice runs a third time, on an idle agent, and the goal is met', async () => {
    const w = machineWorld();
    const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a')] }));
    const retry = '{"verdict":"retry","findings":"a broke","tasks":["a"]}';
    const critic = modelAfter(w.scheduler, SECOND, (_, n) => (n <= 2 ? retry : '{"verdict":"pass","summary":"fixed"}'));
    const worker = modelAfter(w.scheduler, 2 * SECOND, (request, n) => (n <= 2 ? new Error('HTTP 500: a broke') : `done ${taskOf(request)}`));
    const loop = loopWorld(w, { planner: planner.call, critic: critic.call, worker: worker.call, parallelism: 2 });
    await loop.drive();
    expect(loop.state().value).toBe('goal_met');
    expect(loop.plan().filter((kind) => kind.startsWith('plan.task_assigned') || kind.startsWith('plan.goal_met'))).toEqual([
      'plan.task_assigned@1',
      'plan.task_assigned@4',
      'plan.task_assigned@7',
      'plan.goal_met@10',
    ]);
    expect(loop.state().tasks[0]).toMatchObject({ status: 'done', attempts: 3 });
    expect(assignedAgents(loop.runes)).toEqual(['dev-1', 'dev-1', 'dev-1']);
  });

  it('a restart mid-plan: the task the critic sends back after it still meets the idle agent, as often as it is sent back', async () => {
    const w = machineWorld();
    const attempts = (): number => w.state<AutonomyLoopState>(PLAN)!.tasks[0]!.attempts;
    const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a')] }));
    // Answers from the plan's state, not the call count: a call the restart cut is made again.
    const critic = modelAfter(w.scheduler, SECOND, () => (attempts() < 3 ? '{"verdict":"retry","findings":"a broke","tasks":["a"]}' : '{"verdict":"pass","summary":"fixed"}'));
    const worker = modelAfter(w.scheduler, 2 * SECOND, (request) => (attempts() < 3 ? new Error('HTTP 500: a broke') : `done ${taskOf(request)}`));
    const loop = loopWorld(w, { planner: planner.call, critic: critic.call, worker: worker.call, parallelism: 1 });
    await loop.drive(() => w.state<AutonomyLoopState>(PLAN)!.findings !== undefined);
    loop.restart();
    await loop.drive();
    expect(loop.state().value).toBe('goal_met');
    expect(loop.state().tasks[0]).toMatchObject({ status: 'done', attempts: 3, result: 'done a' });
    expect(assignedAgents(loop.runes)).toEqual(['dev-1', 'dev-1', 'dev-1']);
    expect(spawnedAgents(loop.runes)).toEqual([{ agentId: 'dev-1', role: 'dev' }]);
  });
});

describe('issue 28 (a): a plan executing with nothing happening stops as stalled (executingStallMs)', () => {
  const STALLED = "stalled: no rune of the plan or of its tasks' agents for 60000 ms (executingStallMs)";

  it('a task whose turn never answers: executingStallMs after the last rune the plan stops, "stalled", and the turn is interrupted', async () => {
    const w = machineWorld();
    const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a')] }));
    const worker = modelAfter(w.scheduler, 3600 * SECOND, () => 'too late');
    const loop = loopWorld(w, { planner: planner.call, worker: worker.call, executingStallMs: 60 * SECOND });
    await loop.drive();
    expect(loop.plan()).toEqual(['plan.goal_received@0', 'plan.created@1', 'auto_start@1', 'plan.task_assigned@1', 'plan.task_started@1', 'plan.stopped@61']);
    expect(loop.state().reason).toBe(STALLED);
    const interrupted = loop.runes.find((rune) => rune.kind === 'turn.interrupted');
    expect(interrupted?.payload).toMatchObject({ reason: `plan stopped: ${STALLED}` });
  });

  it('the stall deadline survives a restart: it fires at the instant the log gives, not a full executingStallMs after the restart', async () => {
    const w = machineWorld();
    const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a')] }));
    const worker = modelAfter(w.scheduler, 3600 * SECOND, () => 'too late');
    const options = { planner: planner.call, executingStallMs: 60 * SECOND };
    const loop = loopWorld(w, { ...options, worker: worker.call });
    w.scheduler.schedule(() => {}, 30 * SECOND); // a moment mid-wait to restart at
    await loop.drive(() => w.scheduler.now() >= 30 * SECOND);
    // Restarted with the loop's epics only (the agents' streams another process's, say): nothing
    // at the restart touches the turn, so the last rune stays the task's start at 1 s.
    loop.restart(autonomyEpics({ autoStart: true, ...options }));
    await loop.drive();
    expect(loop.plan().slice(-1)).toEqual(['plan.stopped@61']);
    expect(loop.state().reason).toBe(STALLED);
  });

  it('a task whose turn keeps streaming is not stalled, however long it runs', async () => {
    const w = machineWorld();
    const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a')] }));
    const critic = modelAfter(w.scheduler, SECOND, () => '{"verdict":"pass","summary":"shipped"}');
    // A delta every 40 s for 4 minutes: the plan has no rune of its own all that while.
    const worker: StructuredCaller = () =>
      timer(40 * SECOND, 40 * SECOND, w.scheduler).pipe(
        take(6),
        mergeMap((n) => (n < 5 ? [text(`part ${n} `)] : [text('done'), finish()])),
      );
    const loop = loopWorld(w, { planner: planner.call, critic: critic.call, worker, executingStallMs: 60 * SECOND });
    await loop.drive();
    expect(loop.state()).toMatchObject({ value: 'goal_met', summary: 'shipped' });
    expect(loop.plan().slice(-3)).toEqual(['plan.task_completed@241', 'all_tasks_terminal@241', 'plan.goal_met@242']);
  });

  it("a task whose tool call waits for a person's approval is not stalled: the approval has its own timeout", async () => {
    const w = machineWorld();
    const planner = modelAfter(w.scheduler, SECOND, () => JSON.stringify({ tasks: [task('a')] }));
    const critic = modelAfter(w.scheduler, SECOND, () => '{"verdict":"pass","summary":"shipped"}');
    let calls = 0;
    const worker: StructuredCaller = () =>
      timer(SECOND, w.scheduler).pipe(
        mergeMap((): ChainOutput[] =>
          ++calls === 1
            ? [
                { type: 'part', part: { type: 'tool-call', toolCallId: 'c1', toolName: 'deploy', input: {} } },
                { type: 'part', part: { type: 'finish', finishReason: 'tool-calls' } },
              ]
            : [text('deployed'), finish()],
        ),
      );
    const deploy = defineTool({ name: 'deploy', description: 'Deploys.', inputSchema: z.object({}), needsApproval: true, execute: () => 'deployed' });
    const tools = toolCallEffects({ tools: [deploy], approvalTimeoutMs: 3600 * SECOND });
    const loop = loopWorld(w, { planner: planner.call, critic: critic.call, worker, executingStallMs: 60 * SECOND }, autonomyEpics, [tools]);
    const call = agentStreams(ROOT, 'dev-1').call('c1');
    await loop.drive(() => w.value(call) === 'awaiting_approval');
    w.scheduler.schedule(() => {}, 20 * 60 * SECOND); // a person answers 20 minutes later
    await loop.drive(() => w.scheduler.now() >= 20 * 60 * SECOND);
    expect(loop.state().value).toBe('executing');
    await loop.dispatch({ type: 'approved', approver: 'ops' }, call);
    expect(loop.state()).toMatchObject({ value: 'goal_met', summary: 'shipped' });
  });
});
