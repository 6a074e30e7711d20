import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  autonomyLoop,
  edgesOf,
  planProblem,
  runnableTasks,
  stepUnknown,
  type AutonomyLoopEvent,
  type AutonomyLoopInput,
  type AutonomyLoopState,
  type Edge,
  type PlanTask,
  type TaskState,
} from '../../src/index.js';
import { checkMachineProperties, expectNeverThrows, expectNotAllowed, expectRow, expectTerminalsAbsorb, stateAt } from '../support/machine-properties.js';
import { drawnEdges, eventsBeforeParens, expectRuneKind, missingDrawnEdges, readSeed, runeKindRows } from '../support/seed-diagram.js';

type Name = AutonomyLoopState['value'];
const seed = readSeed('003_4203c785f6246465.txt');
const input: AutonomyLoopInput = { goal: 'ship the release' };
const task = (id: string, dependsOn: string[] = [], priority = 0): PlanTask => ({ id, description: `do ${id}`, dependsOn, priority, ownerRole: 'dev' });
const tasksOf = (...statuses: Array<[string, TaskState['status'], string[]?]>): TaskState[] =>
  statuses.map(([id, status, dependsOn = []]) => ({
    ...task(id, dependsOn),
    status,
    attempts: status === 'pending' ? 0 : 1,
    ...(status === 'pending' ? {} : { agentId: 'a1' }),
  }));
/** A plan with one task `t1` in each state (running where tasks can be with agents). */
const at = (value: Name, context: Partial<AutonomyLoopState> = {}) =>
  stateAt(autonomyLoop, value, { tasks: tasksOf(['t1', value === 'reviewing' ? 'failed' : value === 'blocked' ? 'failed' : 'running']), ...context }, input);
const completed = (taskId = 't1'): AutonomyLoopEvent => ({ type: 'task_completed', taskId, outcome: 'success', result: 'ok' });

const samples: AutonomyLoopEvent[] = [
  { type: 'decompose_goal', planId: 'p1', tasks: [task('t1')] },
  { type: 'plan_revised', tasks: [task('t1')] },
  { type: 'planner_failed', reason: 'no plan' },
  { type: 'retry_task', taskId: 't1' },
  { type: 'plan_approved' },
  { type: 'auto_start' },
  { type: 'plan_rejected', changes: ['split t1'] },
  { type: 'user_cancel', reason: 'changed my mind' },
  { type: 'all_tasks_terminal' },
  { type: 'task_assigned', taskId: 't1', agentId: 'a1' },
  { type: 'task_started', taskId: 't1', turnNumber: 1 },
  { type: 'task_completed', morePending: true, taskId: 't1', outcome: 'success', result: 'ok' },
  { type: 'all_runnable_blocked' },
  { type: 'budget_exhausted' },
  { type: 'critique_found_issues', findings: ['no tests'], retry: ['t1'] },
  { type: 'critique_passed', summary: 'done' },
  { type: 'needs_replan', findings: ['wrong approach'] },
  { type: 'dependency_resolved' },
  { type: 'unresolvable', reason: 'API gone' },
  { type: 'budget_started', usage: { inputTokens: 1, outputTokens: 2, modelCalls: 1, toolCalls: 0, wallClockMs: 0 } },
  { type: 'answer_refused', question: 'plan@0', error: 'not JSON' },
];

describe('autonomyLoop: seed 003 diagram, edge by edge', () => {
  const rows: Array<[Name, AutonomyLoopEvent, Name, string]> = [
    ['goal_received', { type: 'decompose_goal', planId: 'p1', tasks: [task('t1')] }, 'planning', 'plan.created'],
    ['planning', { type: 'plan_approved' }, 'executing', 'plan_approved'],
    ['planning', { type: 'auto_start' }, 'executing', 'auto_start'],
    ['planning', { type: 'plan_rejected' }, 'goal_received', 'plan.updated'],
    ['planning', { type: 'user_cancel' }, 'stopped', 'plan.stopped'],
    ['executing', completed(), 'executing', 'plan.task_completed'],
    ['executing', { type: 'budget_exhausted' }, 'stopped', 'plan.stopped'],
    ['executing', { type: 'user_cancel' }, 'stopped', 'plan.stopped'],
    ['reviewing', { type: 'critique_found_issues', retry: ['t1'] }, 'executing', 'plan.critique'],
    ['reviewing', { type: 'critique_passed' }, 'goal_met', 'plan.goal_met'],
    ['reviewing', { type: 'needs_replan' }, 'planning', 'plan.critique'],
    ['blocked', { type: 'unresolvable' }, 'stopped', 'plan.stopped'],
    ['blocked', { type: 'user_cancel' }, 'stopped', 'plan.stopped'],
    // The rune table's executing runes that the diagram does not draw.
    ['executing', { type: 'task_started', taskId: 't1', turnNumber: 2 }, 'executing', 'plan.task_started'],
  ];
  it.each(rows)('%s + %o -> %s (%s)', (from, event, to, kind) => {
    expectRow(autonomyLoop, at(from), event, to, kind);
  });

  it('the guarded rows: all_tasks_terminal, all_runnable_blocked, task_assigned, dependency_resolved follow from the tasks', () => {
    expectRow(autonomyLoop, at('executing', { tasks: tasksOf(['t1', 'done'], ['t2', 'failed']) }), { type: 'all_tasks_terminal' }, 'reviewing');
    expectRow(autonomyLoop, at('executing', { tasks: tasksOf(['t1', 'failed'], ['t2', 'pending', ['t1']]) }), { type: 'all_runnable_blocked' }, 'blocked');
    expectRow(autonomyLoop, at('executing', { tasks: tasksOf(['t1', 'pending']) }), { type: 'task_assigned', taskId: 't1', agentId: 'a1' }, 'executing', 'plan.task_assigned');
    expectRow(autonomyLoop, at('blocked', { tasks: tasksOf(['t1', 'pending']) }), { type: 'dependency_resolved' }, 'executing');
    expectNotAllowed(
      autonomyLoop,
      at('executing'),
      { type: 'all_tasks_terminal' },
      'event "all_tasks_terminal" is not allowed in state "executing": it needs every task done or failed',
    );
    expectNotAllowed(autonomyLoop, at('blocked'), { type: 'dependency_resolved' }, 'event "dependency_resolved" is not allowed in state "blocked": it needs a task runnable');
  });

  it('every drawn transition is in the table', () => {
    const drawn = drawnEdges(seed, '## Autonomy Loop State Machine');
    expect(drawn.length).toBe(13);
    expect(missingDrawnEdges(edgesOf(autonomyLoop), drawn, eventsBeforeParens)).toEqual([]);
  });
});

describe('autonomyLoop: seed 003 "Autonomy Events (Rune Kinds)"', () => {
  const heading = '### Autonomy Events (Rune Kinds)';
  // A state row names the runes appended in that state (planning, executing, reviewing) or on entering
  // it: the edges matching any of the row's patterns.
  const rows: Array<[string, string, Partial<Edge>[] | 'spawn']> = [
    ['goal_received', 'plan.goal_received', 'spawn'],
    ['planning', 'plan.created', [{ on: 'decompose_goal' }]],
    ['planning', 'plan.updated', [{ from: 'planning', on: 'plan_rejected' }]],
    ['executing', 'plan.task_assigned', [{ from: 'executing', on: 'task_assigned' }]],
    ['executing', 'plan.task_started', [{ from: 'executing', on: 'task_started' }]],
    ['executing', 'plan.task_completed', [{ from: 'executing', on: 'task_completed' }]],
    [
      'reviewing',
      'plan.critique',
      [
        { from: 'reviewing', to: 'executing' },
        { from: 'reviewing', to: 'planning' },
      ],
    ],
    ['goal_met', 'plan.goal_met', [{ to: 'goal_met' }]],
    ['stopped', 'plan.stopped', [{ to: 'stopped' }]],
  ];

  it('lists exactly the seed table', () => {
    expect(runeKindRows(seed, heading)).toEqual(rows.map(([where, kind]) => [where, kind]));
  });

  it.each(rows)('%s: %s', (_, kind, where) => {
    expectRuneKind(autonomyLoop, where, kind);
  });

  it("marks the rune-table rows as the seed's, with a note", () => {
    for (const on of ['task_assigned', 'task_started'] as const) {
      expect(edgesOf(autonomyLoop).find((e) => e.on === on)).toMatchObject({ source: 'seed', note: expect.stringContaining('rune table') });
    }
  });
});

describe('autonomyLoop: context', () => {
  it('starts with the goal and no tasks', () => {
    expect(autonomyLoop.initial(input)).toEqual({ value: 'goal_received', goal: 'ship the release', tasks: [], tasksCompleted: 0, revisions: 0, replans: 0 });
  });

  it('folds a run to goal_met into its context: each task with its status, agent, turn, attempts and result', () => {
    const events: AutonomyLoopEvent[] = [
      { type: 'decompose_goal', planId: 'p1', tasks: [task('t1'), task('t2', ['t1'])] },
      { type: 'auto_start' },
      { type: 'task_assigned', taskId: 't1', agentId: 'a1' },
      { type: 'task_started', taskId: 't1', turnNumber: 1 },
      { type: 'task_completed', taskId: 't1', outcome: 'success', result: 'built' },
      { type: 'task_assigned', taskId: 't2', agentId: 'a2' },
      { type: 'task_started', taskId: 't2', turnNumber: 1 },
      { type: 'task_completed', taskId: 't2', outcome: 'failure', result: 'the turn failed: boom' },
      { type: 'all_tasks_terminal' },
      { type: 'critique_found_issues', findings: 'changelog missing', retry: ['t2'] },
      { type: 'task_assigned', taskId: 't2', agentId: 'a2' },
      { type: 'task_started', taskId: 't2', turnNumber: 2 },
      { type: 'task_completed', taskId: 't2', outcome: 'success', result: 'tested' },
      { type: 'all_tasks_terminal' },
      { type: 'critique_passed', summary: 'released' },
    ];
    expect(events.reduce((s, e) => autonomyLoop.transition(s, e), autonomyLoop.initial(input))).toEqual({
      value: 'goal_met',
      goal: 'ship the release',
      planId: 'p1',
      tasks: [
        { ...task('t1'), status: 'done', attempts: 1, agentId: 'a1', turnNumber: 1, result: 'built' },
        { ...task('t2', ['t1']), status: 'done', attempts: 2, agentId: 'a2', turnNumber: 2, result: 'tested' },
      ],
      tasksCompleted: 3,
      revisions: 0,
      replans: 0,
      replanning: false,
      findings: 'changelog missing',
      summary: 'released',
    });
  });

  it('a completion is accepted once: a task not with an agent (done, pending) refuses another', () => {
    const done = autonomyLoop.transition(at('executing'), completed());
    expect(done.tasks[0]).toMatchObject({ status: 'done', result: 'ok' });
    expect(autonomyLoop.step(done, completed())).toMatchObject({ accepted: false, code: 'not_allowed' });
    expect(autonomyLoop.step(at('executing', { tasks: tasksOf(['t1', 'pending']) }), completed())).toMatchObject({ accepted: false });
  });

  it('a replan: needs_replan revises in planning (plan.updated); a done task kept with the same id and description is not run again', () => {
    const reviewing = at('reviewing', { planId: 'p1', tasks: [{ ...tasksOf(['a', 'done'])[0]!, result: 'A' }, ...tasksOf(['b', 'failed', ['a']])] });
    const replanning = expectRow(autonomyLoop, reviewing, { type: 'needs_replan', findings: 'b cannot work' }, 'planning', 'plan.critique');
    expect(replanning).toMatchObject({ replanning: true, replans: 1 });
    expect(autonomyLoop.step(replanning, { type: 'plan_approved' })).toMatchObject({ accepted: false, reason: expect.stringContaining('a plan ready') });
    const step = autonomyLoop.step(replanning, { type: 'plan_revised', tasks: [task('a'), task('c', ['a'])] });
    expect(step).toMatchObject({ accepted: true, kind: 'plan.updated', payload: { planId: 'p1', tasks: [task('a'), task('c', ['a'])] } });
    expect(step.state.tasks.map((t) => [t.id, t.status, t.result])).toEqual([
      ['a', 'done', 'A'],
      ['c', 'pending', undefined],
    ]);
    expect(autonomyLoop.transition(step.state, { type: 'auto_start' }).value).toBe('executing');
  });

  it('an operator retries a failed task in blocked (plan.task_retried); then it is runnable', () => {
    const blocked = at('blocked', { tasks: tasksOf(['a', 'failed'], ['b', 'pending', ['a']]) });
    const step = autonomyLoop.step(blocked, { type: 'retry_task', taskId: 'a' });
    expect(step).toMatchObject({ accepted: true, kind: 'plan.task_retried', state: { value: 'blocked' } });
    expect(runnableTasks(step.state.tasks).map((t) => t.id)).toEqual(['a']);
    expect(autonomyLoop.step(blocked, { type: 'retry_task', taskId: 'b' })).toMatchObject({ accepted: false, reason: expect.stringContaining('the task failed') });
  });

  it.each([
    ['executing', { type: 'user_cancel', reason: 'changed my mind' }, 'changed my mind'],
    ['executing', { type: 'user_cancel' }, 'user_cancel'],
    ['executing', { type: 'budget_exhausted' }, 'budget_exhausted'],
    ['blocked', { type: 'unresolvable', reason: 'API gone' }, 'API gone'],
    ['blocked', { type: 'unresolvable' }, 'unresolvable'],
    ['goal_received', { type: 'planner_failed', reason: 'planner: no valid answer' }, 'planner: no valid answer'],
    ['reviewing', { type: 'unresolvable', reason: 'critic: retries used up' }, 'critic: retries used up'],
  ] as Array<[Name, AutonomyLoopEvent, string]>)('in %s, %o stops with reason %j', (from, event, reason) => {
    expect(autonomyLoop.transition(at(from), event)).toMatchObject({ value: 'stopped', reason });
  });
});

describe('autonomyLoop: plans', () => {
  it('refuses a plan with a cycle, naming it; a duplicate id; a dependency on an unknown task', () => {
    expect(planProblem([task('a', ['c']), task('b', ['a']), task('c', ['b'])])).toBe('the plan has a dependency cycle: a -> c -> b -> a');
    expect(planProblem([task('a', ['a'])])).toBe('the plan has a dependency cycle: a -> a');
    expect(planProblem([task('a'), task('a')])).toBe('task id "a" appears twice');
    expect(planProblem([task('a', ['z'])])).toBe('task "a" depends on "z", which is not a task of the plan');
    expect(planProblem([task('a'), task('b', ['a']), task('c', ['a', 'b'])])).toBeUndefined();
    expect(autonomyLoop.step(at('goal_received'), { type: 'decompose_goal', planId: 'p1', tasks: [task('a', ['b']), task('b', ['a'])] })).toMatchObject({
      accepted: false,
      reason: expect.stringContaining('an acyclic plan'),
    });
  });

  it('runnable tasks: pending with every dependency done, highest priority first, ties in plan order', () => {
    const tasks: TaskState[] = [
      ...tasksOf(['a', 'done'], ['b', 'pending', ['a']], ['c', 'pending'], ['d', 'pending', ['c']]),
      { ...task('e', [], 5), status: 'pending', attempts: 0 },
    ];
    expect(runnableTasks(tasks).map((t) => t.id)).toEqual(['e', 'b', 'c']);
  });
});

describe('autonomyLoop: extension', () => {
  it.each(['goal_received', 'reviewing'] as const)('user_cancel stops the loop from %s too', (from) => {
    expect(autonomyLoop.step(at(from), { type: 'user_cancel' })).toMatchObject({ accepted: true, kind: 'plan.stopped', state: { value: 'stopped' } });
    expect(edgesOf(autonomyLoop).find((e) => e.from === from && e.on === 'user_cancel')).toMatchObject({ source: 'extension' });
  });

  it('a user can stop the loop from every live state', () => {
    const live = autonomyLoop.states.filter((s) => !autonomyLoop.terminal.includes(s));
    for (const value of live) expect(autonomyLoop.transition(at(value as Name), { type: 'user_cancel' }).value).toBe('stopped');
  });

  it('marks every row the seed does not draw as an extension with a note', () => {
    for (const on of ['plan_revised', 'planner_failed', 'retry_task', 'budget_started', 'answer_refused'] as const) {
      for (const edge of edgesOf(autonomyLoop).filter((e) => e.on === on)) expect(edge).toMatchObject({ source: 'extension', note: expect.any(String) });
    }
  });
});

describe('autonomyLoop: durable counters', () => {
  const usage = { inputTokens: 5, outputTokens: 10, modelCalls: 1, toolCalls: 0, wallClockMs: 0 };

  it("budget_started records the conversation's usage once, in executing (plan.budget_started); a second is refused", () => {
    const step = autonomyLoop.step(at('executing'), { type: 'budget_started', usage });
    expect(step).toMatchObject({ accepted: true, kind: 'plan.budget_started', payload: { usage }, state: { value: 'executing', usageAtStart: usage } });
    expect(autonomyLoop.step(step.state, { type: 'budget_started', usage: { ...usage, outputTokens: 99 } })).toMatchObject({
      accepted: false,
      reason: expect.stringContaining('none recorded yet'),
    });
    expect(autonomyLoop.step(at('planning'), { type: 'budget_started', usage }).accepted).toBe(false);
  });

  it('answer_refused counts the refusals of one question (plan.answer_refused); another question counts from 1', () => {
    let s = at('goal_received');
    const first = autonomyLoop.step(s, { type: 'answer_refused', question: 'plan@0', error: 'not JSON' });
    expect(first).toMatchObject({ accepted: true, kind: 'plan.answer_refused', payload: { question: 'plan@0', attempt: 1, error: 'not JSON' } });
    s = autonomyLoop.transition(first.state, { type: 'answer_refused', question: 'plan@0', error: 'a cycle' });
    expect(s).toMatchObject({ value: 'goal_received', refused: { question: 'plan@0', attempts: 2, error: 'a cycle' } });
    expect(autonomyLoop.transition(s, { type: 'answer_refused', question: 'plan@1', error: 'x' }).refused).toEqual({ question: 'plan@1', attempts: 1, error: 'x' });
    for (const value of ['planning', 'reviewing'] as const) expect(autonomyLoop.step(at(value), { type: 'answer_refused', question: 'q', error: 'e' }).accepted).toBe(true);
    expect(autonomyLoop.step(at('executing'), { type: 'answer_refused', question: 'q', error: 'e' }).accepted).toBe(false);
  });
});

describe('autonomyLoop: rejections', () => {
  it('every terminal state rejects every event with "terminal state"', () => {
    expectTerminalsAbsorb(autonomyLoop, samples, input);
  });

  it('runs no task before the plan is approved', () => {
    expectNotAllowed(autonomyLoop, at('planning'), { type: 'task_assigned', taskId: 't1', agentId: 'a1' }, 'event "task_assigned" is not allowed in state "planning"');
  });

  it('meets the goal only through a passing critique', () => {
    expect(autonomyLoop.step(at('executing'), { type: 'critique_passed' })).toMatchObject({
      accepted: false,
      code: 'not_allowed',
      reason: 'event "critique_passed" is not allowed in state "executing"',
    });
  });
});

describe('autonomyLoop: bad input', () => {
  it('names the field of an event that fails its schema', () => {
    const step = stepUnknown(autonomyLoop, at('executing'), { type: 'task_assigned', taskId: 't1' });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(`"invalid "task_assigned" event: agentId: Invalid input: expected string, received undefined"`);
    const plan = stepUnknown(autonomyLoop, at('goal_received'), { type: 'decompose_goal', planId: 'p1', tasks: [{ id: 'a/b', description: 'x', ownerRole: 'dev' }] });
    expect(!plan.accepted && plan.reason).toMatch(/^invalid "decompose_goal" event: tasks\.0\.id: must be 1 to 64 letters/);
  });

  it('rejects an unknown event type by name', () => {
    const step = stepUnknown(autonomyLoop, at('executing'), { type: 'task.completed' });
    expect(!step.accepted && step.reason).toMatch(/^unknown event type "task.completed" for machine "autonomy-loop"; expected one of: decompose_goal, plan_revised/);
  });

  it('needs a goal', () => {
    expect(autonomyLoop.schemas.input.safeParse({ goal: '' }).success).toBe(false);
  });

  it('never throws out of transition, even for hand-built events that skip validation', () => {
    const bad = [
      null,
      undefined,
      42,
      {},
      { type: 'user_cancel', reason: 7 },
      { type: 'valueOf' },
      { type: '__proto__' },
      { type: 'decompose_goal', tasks: [{}] },
      { type: 'task_completed' },
    ];
    expectNeverThrows(
      autonomyLoop,
      autonomyLoop.states.map((value) => at(value as Name)),
      bad,
    );
  });
});

describe('autonomyLoop: properties', () => {
  const text = fc.string({ maxLength: 12 });
  const id = fc.constantFrom('t1', 't2', 't3');
  const tasks = fc.uniqueArray(id, { minLength: 1, maxLength: 3 }).map((ids) => ids.map((each, index) => task(each, index === 0 ? [] : [ids[index - 1]!])));
  const event: fc.Arbitrary<AutonomyLoopEvent> = fc.oneof(
    fc.record({ type: fc.constant('decompose_goal' as const), planId: fc.constant('p1'), tasks }),
    fc.record({ type: fc.constant('plan_revised' as const), tasks }),
    fc.record({ type: fc.constant('planner_failed' as const), reason: text }),
    fc.constant({ type: 'plan_approved' as const }),
    fc.constant({ type: 'auto_start' as const }),
    fc.constant({ type: 'plan_rejected' as const }),
    fc.record({ type: fc.constant('user_cancel' as const), reason: text }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'all_tasks_terminal' as const }),
    fc.record({ type: fc.constant('task_assigned' as const), taskId: id, agentId: fc.constantFrom('a1', 'a2') }),
    fc.record({ type: fc.constant('task_started' as const), taskId: id, turnNumber: fc.integer({ min: 1, max: 3 }) }),
    fc.record({ type: fc.constant('task_completed' as const), taskId: id, outcome: fc.constantFrom('success' as const, 'failure' as const), result: text }),
    fc.constant({ type: 'all_runnable_blocked' as const }),
    fc.constant({ type: 'budget_exhausted' as const }),
    fc.record({ type: fc.constant('critique_found_issues' as const), retry: fc.uniqueArray(id, { minLength: 1, maxLength: 2 }) }),
    fc.record({ type: fc.constant('critique_passed' as const), summary: text }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'needs_replan' as const }),
    fc.record({ type: fc.constant('retry_task' as const), taskId: id }),
    fc.constant({ type: 'dependency_resolved' as const }),
    fc.record({ type: fc.constant('unresolvable' as const), reason: text }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'budget_started' as const, usage: { inputTokens: 1, outputTokens: 1, modelCalls: 1, toolCalls: 0, wallClockMs: 0 } }),
    fc.record({ type: fc.constant('answer_refused' as const), question: fc.constantFrom('plan@0', 'review@0.1'), error: text }),
  );

  it('random event sequences keep every machine property; a task with an agent is never complete twice; a stop says why', () => {
    checkMachineProperties(autonomyLoop, {
      event,
      input: fc.string({ minLength: 1, maxLength: 12 }).map((goal) => ({ goal })),
      onAccepted: (prev, e, next) => {
        expect(next.goal).toBe(prev.goal);
        expect(next.tasksCompleted).toBe(prev.tasksCompleted + (e.type === 'task_completed' ? 1 : 0));
        if (e.type === 'task_completed') expect(['assigned', 'running']).toContain(prev.tasks.find((t) => t.id === e.taskId)?.status);
        if (next.value === 'executing') expect(planProblem(next.tasks)).toBeUndefined();
        if (next.value === 'stopped') expect(next.reason).toBeDefined();
      },
    });
  });
});
