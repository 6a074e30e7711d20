import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import { filter, firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { agentEpics, autonomyEpics, scriptedModel, type AutonomyOptions, type ScriptStep } from '../../../src/agents.js';
import { createEngine, planStream, type AutonomyLoopState, type Engine, type EngineError, type PlanTaskInput, type Rune } from '../../../src/index.js';

/**
 * The autonomy loop end to end on an engine in memory: the planner, critic and workers are
 * scripted models (offline), the agents are `agentEpics`'. Each test reads the plan's runes.
 */

const PLAN = planStream('c1', 'p1');
const engines: Engine[] = [];
afterEach(async () => {
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
});

const task = (id: string, dependsOn: string[] = [], priority = 0): PlanTaskInput => ({ id, description: `do ${id}`, dependsOn, priority, ownerRole: 'dev' });
const planText = (...tasks: PlanTaskInput[]): ScriptStep => ({ text: JSON.stringify({ tasks }) });
const verdict = (answer: object): ScriptStep => ({ text: JSON.stringify(answer) });
const PASS = verdict({ verdict: 'pass', summary: 'all good' });

/** The text of a call's last user message: a task's prompt. */
const lastUser = (call: LanguageModelV4CallOptions): string => {
  const message = call.prompt.filter((m) => m.role === 'user').at(-1);
  return message === undefined ? '' : JSON.stringify(message.content);
};

/** A worker that answers `done <task id>`, or fails for the tasks `failing` says (each call asked). */
function worker(failing: (taskId: string, call: number) => boolean = () => false) {
  const calls = new Map<string, number>();
  return scriptedModel(
    [
      (call) => {
        const taskId = /Task \\"([^\\"]+)\\"/.exec(lastUser(call))?.[1] ?? '?';
        const n = (calls.get(taskId) ?? 0) + 1;
        calls.set(taskId, n);
        return failing(taskId, n) ? { error: `HTTP 500: ${taskId} broke` } : { text: `done ${taskId}` };
      },
    ],
    { whenExhausted: 'cycle' },
  );
}

interface Run {
  readonly engine: Engine;
  readonly runes: Rune[];
  readonly states: AutonomyLoopState[];
  readonly errors: EngineError[];
}

/** An engine with the agents and the loop; the plan spawned with `goal`. */
async function start(options: Omit<AutonomyOptions, 'planner'> & { planner: AutonomyOptions['planner']; workers?: ReturnType<typeof worker> }): Promise<Run> {
  const { workers = worker(), ...loop } = options;
  const engine = createEngine({ epics: [...agentEpics({ model: workers }), ...autonomyEpics({ autoStart: true, ...loop })] });
  engines.push(engine);
  const runes: Rune[] = [];
  const states: AutonomyLoopState[] = [];
  const errors: EngineError[] = [];
  engine.errors$.subscribe((error) => errors.push(error));
  engine.runes$().subscribe((rune) => runes.push(rune));
  await engine.spawn(PLAN, 'autonomy-loop', { goal: 'ship it' });
  engine.state$<AutonomyLoopState>(PLAN).subscribe((state) => states.push(state));
  return { engine, runes, states, errors };
}

const reach = (run: Run, ...values: AutonomyLoopState['value'][]) => firstValueFrom(run.engine.state$<AutonomyLoopState>(PLAN).pipe(filter((s) => values.includes(s.value))));
const planKinds = (run: Run): string[] => run.runes.filter((rune) => rune.stream === PLAN).map((rune) => rune.kind);
const completions = (run: Run) =>
  run.runes.filter((rune) => rune.stream === PLAN && rune.kind === 'plan.task_completed').map((rune) => rune.payload as { taskId: string; outcome: string; result: string });

describe('autonomyEpics: a plan with dependencies', () => {
  it('runs each task after its dependencies, within the parallelism, on agents of its role; reviewed, the goal is met', async () => {
    const planner = scriptedModel([planText(task('a'), task('b'), task('c'), task('d', ['a', 'b', 'c']), task('e', ['d'], 1), task('f', ['d'], 5))]);
    const critic = scriptedModel([PASS]);
    const run = await start({ planner, critic, parallelism: 2 });
    const done = await reach(run, 'goal_met', 'stopped');

    expect(done).toMatchObject({ value: 'goal_met', summary: 'all good' });
    expect(done.tasks.map((t) => [t.id, t.status, t.result])).toEqual(['a', 'b', 'c', 'd', 'e', 'f'].map((id) => [id, 'done', `done ${id}`]));
    // Never more than 2 tasks with agents, and 2 at once at some point.
    const active = run.states.map((s) => s.tasks.filter((t) => t.status === 'assigned' || t.status === 'running').length);
    expect(Math.max(...active)).toBe(2);
    // Order: d after a, b and c are done; f (priority 5) before e (priority 1).
    const order = completions(run).map((c) => c.taskId);
    expect(order.indexOf('d')).toBeGreaterThan(Math.max(order.indexOf('a'), order.indexOf('b'), order.indexOf('c')));
    const assigned = run.runes.filter((r) => r.kind === 'plan.task_assigned').map((r) => (r.payload as { taskId: string }).taskId);
    expect(assigned.indexOf('f')).toBeLessThan(assigned.indexOf('e'));
    // The agents: at most `parallelism` of the role, spawned with it.
    const spawned = run.runes.filter((r) => r.kind === 'agent.spawning').map((r) => r.payload);
    expect(spawned).toEqual([
      { agentId: 'dev-1', role: 'dev' },
      { agentId: 'dev-2', role: 'dev' },
    ]);
    // Evidence: the task's turn and its seq range; the dependencies' results are in the task's prompt.
    const d = done.tasks.find((t) => t.id === 'd')!;
    expect(d.evidence).toMatchObject({ turn: `conv/c1/agent/${d.agentId}/turn`, toolResults: [] });
    const dPrompt = run.runes.find((r) => r.kind === 'turn.started' && String((r.payload as { input?: string }).input).includes('Task "d"'));
    expect((dPrompt!.payload as { input: string }).input).toContain('- a: done a');
    expect(planKinds(run).at(-1)).toBe('plan.goal_met');
    expect(completions(run)).toHaveLength(6); // each task completed once
    expect(run.errors).toEqual([]);
  });

  it('waits for a client to approve the plan unless autoStart', async () => {
    const planner = scriptedModel([planText(task('a'))]);
    const run = await start({ planner, critic: scriptedModel([PASS]), autoStart: false });
    await reach(run, 'planning');
    expect(run.runes.some((r) => r.kind === 'plan.task_assigned')).toBe(false);
    await run.engine.dispatch(PLAN, { type: 'plan_approved' });
    expect(await reach(run, 'goal_met', 'stopped')).toMatchObject({ value: 'goal_met' });
  });
});

describe('autonomyEpics: review', () => {
  it('a failed task is retried after the critique, and the goal is met', async () => {
    const planner = scriptedModel([planText(task('a'), task('b'))]);
    const critic = scriptedModel([verdict({ verdict: 'retry', findings: 'b failed', tasks: ['b'] }), PASS]);
    const workers = worker((id, n) => id === 'b' && n === 1);
    const run = await start({ planner, critic, workers });
    const done = await reach(run, 'goal_met', 'stopped');
    expect(done.value).toBe('goal_met');
    expect(completions(run).map((c) => [c.taskId, c.outcome])).toEqual(
      expect.arrayContaining([
        ['a', 'success'],
        ['b', 'failure'],
        ['b', 'success'],
      ]),
    );
    expect(completions(run)).toHaveLength(3);
    expect(completions(run).find((c) => c.outcome === 'failure')?.result).toContain('the turn failed');
    expect(done.tasks.find((t) => t.id === 'b')).toMatchObject({ status: 'done', attempts: 2 });
    expect(run.runes.find((r) => r.kind === 'plan.critique')?.payload).toEqual({ planId: 'p1', findings: 'b failed', retry: ['b'] });
  });

  it('a retry past maxTaskAttempts stops the loop, naming the task', async () => {
    const planner = scriptedModel([planText(task('a'))]);
    const critic = scriptedModel([verdict({ verdict: 'retry', findings: 'a failed', tasks: ['a'] })], { whenExhausted: 'cycle' });
    const run = await start({ planner, critic, workers: worker(() => true), maxTaskAttempts: 2 });
    const done = await reach(run, 'goal_met', 'stopped');
    expect(done).toMatchObject({ value: 'stopped', reason: 'critic: a failed; "a" ran 2 times (maxTaskAttempts)' });
    expect(completions(run)).toHaveLength(2);
  });

  it('a replan: the critic sends the plan back, the planner revises it (plan.updated), a done task kept is not run again', async () => {
    const planner = scriptedModel([planText(task('a'), task('b', ['a'])), planText(task('a'), task('c', ['a']))]);
    const critic = scriptedModel([verdict({ verdict: 'replan', findings: 'b is the wrong approach' }), PASS]);
    const run = await start({ planner, critic, workers: worker((id) => id === 'b') });
    const done = await reach(run, 'goal_met', 'stopped');
    expect(done.value).toBe('goal_met');
    expect(planKinds(run).filter((k) => k.startsWith('plan.'))).toEqual(expect.arrayContaining(['plan.created', 'plan.critique', 'plan.updated', 'plan.goal_met']));
    expect(done.tasks.map((t) => [t.id, t.status])).toEqual([
      ['a', 'done'],
      ['c', 'done'],
    ]);
    expect(completions(run).filter((c) => c.taskId === 'a')).toHaveLength(1);
    expect(JSON.stringify(planner.doStreamCalls[1]!.prompt)).toContain('b is the wrong approach');
  });
});

describe('autonomyEpics: blocked', () => {
  it("a failed dependency blocks the plan; an operator's retry_task unblocks it and the plan finishes", async () => {
    const planner = scriptedModel([planText(task('a'), task('b', ['a']))]);
    const run = await start({ planner, critic: scriptedModel([PASS]), workers: worker((id, n) => id === 'a' && n === 1) });
    await reach(run, 'blocked');
    await run.engine.dispatch(PLAN, { type: 'retry_task', taskId: 'a' });
    const done = await reach(run, 'goal_met', 'stopped');
    expect(done.value).toBe('goal_met');
    expect(planKinds(run)).toEqual(expect.arrayContaining(['all_runnable_blocked', 'plan.task_retried', 'dependency_resolved']));
    expect(done.tasks.map((t) => [t.id, t.status])).toEqual([
      ['a', 'done'],
      ['b', 'done'],
    ]);
  });
});

describe('autonomyEpics: stops', () => {
  it("the conversation's usage reaching the plan budget stops it (budget_exhausted)", async () => {
    const planner = scriptedModel([planText(task('a'), task('b', ['a']), task('c', ['b']))]);
    const run = await start({ planner, critic: scriptedModel([PASS]), budget: { modelCalls: 2 } });
    const done = await reach(run, 'goal_met', 'stopped');
    expect(done).toMatchObject({ value: 'stopped', reason: 'budget: modelCalls 2 of 2' });
    // b's turn used the budget up: it may have stopped the plan before b's completion was applied.
    expect(done.tasks.map((t) => t.status)).toEqual(['done', expect.stringMatching(/^(done|running)$/), 'pending']);
    expect(run.runes.some((r) => r.kind === 'turn.started' && String((r.payload as { input?: string }).input).includes('Task "c"'))).toBe(false);
  });

  it("a user's cancel stops the plan and interrupts its running task's turn", async () => {
    const planner = scriptedModel([planText(task('a'))]);
    const hanging = scriptedModel([{ text: 'working', hang: true, afterDeltas: 1 }]);
    const run = await start({ planner, critic: scriptedModel([PASS]), workers: hanging as ReturnType<typeof worker> });
    await firstValueFrom(run.engine.runes$().pipe(filter((r) => r.kind === 'turn.assistant_delta')));
    await run.engine.dispatch(PLAN, { type: 'user_cancel', reason: 'enough' });
    const interrupted = await firstValueFrom(run.engine.runes$().pipe(filter((r) => r.kind === 'turn.interrupted' && r.stream.endsWith('/turn'))));
    expect(interrupted.payload).toMatchObject({ reason: 'plan stopped: enough', partialOutput: 'working' });
    expect(completions(run)).toEqual([]);
    expect((await run.engine.snapshot<AutonomyLoopState>(PLAN))?.state).toMatchObject({ value: 'stopped', reason: 'enough' });
  });
});

describe('autonomyEpics: bad planner answers', () => {
  it('an answer failing its schema is asked again with the error; after maxPlannerAttempts the loop stops with the reason', async () => {
    const planner = scriptedModel([{ text: 'I think we should build it.' }, { text: '{"tasks":[{"id":"a"}]}' }]);
    const run = await start({ planner, maxPlannerAttempts: 2 });
    const done = await reach(run, 'stopped', 'planning');
    expect(done.value).toBe('stopped');
    expect(done.reason).toMatch(/^planner: no valid answer in 2 attempts: tasks\.0\.description: Invalid input/);
    // The second call saw the first answer and why it was refused.
    const second = JSON.stringify(planner.doStreamCalls[1]!.prompt);
    expect(second).toContain('I think we should build it.');
    expect(second).toContain('That answer was refused: not JSON');
  });

  it('a plan with a dependency cycle is refused naming it; a valid answer after it is taken', async () => {
    const planner = scriptedModel([planText(task('a', ['b']), task('b', ['a'])), planText(task('a'))]);
    const run = await start({ planner, critic: scriptedModel([PASS]) });
    expect(await reach(run, 'goal_met', 'stopped')).toMatchObject({ value: 'goal_met' });
    expect(JSON.stringify(planner.doStreamCalls[1]!.prompt)).toContain('the plan has a dependency cycle: a -> b -> a');
  });

  it('a cycle every time: stopped with the cycle as the reason', async () => {
    const planner = scriptedModel([planText(task('a', ['b']), task('b', ['a']))], { whenExhausted: 'cycle' });
    const run = await start({ planner });
    expect(await reach(run, 'stopped')).toMatchObject({ reason: 'planner: no valid answer in 3 attempts: the plan has a dependency cycle: a -> b -> a' });
    expect(planner.doStreamCalls).toHaveLength(3);
  });

  it('a task naming a role that is not configured is refused', async () => {
    const planner = scriptedModel([planText(task('a'))]);
    const run = await start({ planner, roles: { writer: { description: 'writes' } }, maxPlannerAttempts: 1 });
    expect(await reach(run, 'stopped')).toMatchObject({ reason: 'planner: no valid answer in 1 attempt: task "a" has ownerRole "dev"; the roles are writer' });
  });
});

describe('autonomyEpics: options', () => {
  it('refuses an executingStallMs that is not a positive number, naming it', () => {
    const planner = scriptedModel([planText(task('a'))]);
    for (const executingStallMs of [0, -1, Number.NaN])
      expect(() => autonomyEpics({ planner, executingStallMs })).toThrow(`autonomyEpics: "executingStallMs" must be a positive number, got ${String(executingStallMs)}`);
    expect(() => autonomyEpics({ planner, executingStallMs: 1500.5 })).not.toThrow();
  });
});
