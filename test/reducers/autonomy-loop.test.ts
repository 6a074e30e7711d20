import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { autonomyLoop, edgesOf, stepUnknown, type AutonomyLoopEvent, type AutonomyLoopInput, type AutonomyLoopState, type Edge } from '../../src/index.js';
import { checkMachineProperties, expectNeverThrows, expectNotAllowed, expectRow, expectTerminalsAbsorb, stateAt } from '../support/machine-properties.js';
import { drawnEdges, eventsBeforeParens, expectRuneKind, missingDrawnEdges, readSeed, runeKindRows } from '../support/seed-diagram.js';

type Name = AutonomyLoopState['value'];
const seed = readSeed('003_4203c785f6246465.txt');
const input: AutonomyLoopInput = { goal: 'ship the release' };
const at = (value: Name, context: Partial<AutonomyLoopState> = {}) => stateAt(autonomyLoop, value, context, input);

const samples: AutonomyLoopEvent[] = [
  { type: 'decompose_goal', planId: 'p1', tasks: [{ id: 't1' }] },
  { type: 'plan_approved' },
  { type: 'auto_start' },
  { type: 'plan_rejected', changes: ['split t1'] },
  { type: 'user_cancel', reason: 'changed my mind' },
  { type: 'all_tasks_terminal' },
  { type: 'task_assigned', taskId: 't1', agentId: 'a1' },
  { type: 'task_started', taskId: 't1' },
  { type: 'task_completed', morePending: true, taskId: 't1', result: 'ok' },
  { type: 'all_runnable_blocked' },
  { type: 'budget_exhausted' },
  { type: 'critique_found_issues', findings: ['no tests'] },
  { type: 'critique_passed', summary: 'done' },
  { type: 'needs_replan', findings: ['wrong approach'] },
  { type: 'dependency_resolved' },
  { type: 'unresolvable', reason: 'API gone' },
];

describe('autonomyLoop: seed 003 diagram, edge by edge', () => {
  const rows: Array<[Name, AutonomyLoopEvent, Name, string]> = [
    ['goal_received', { type: 'decompose_goal', planId: 'p1' }, 'planning', 'plan.created'],
    ['planning', { type: 'plan_approved' }, 'executing', 'plan_approved'],
    ['planning', { type: 'auto_start' }, 'executing', 'auto_start'],
    ['planning', { type: 'plan_rejected' }, 'goal_received', 'plan.updated'],
    ['planning', { type: 'user_cancel' }, 'stopped', 'plan.stopped'],
    ['executing', { type: 'all_tasks_terminal' }, 'reviewing', 'all_tasks_terminal'],
    ['executing', { type: 'task_completed', morePending: true }, 'executing', 'plan.task_completed'],
    ['executing', { type: 'all_runnable_blocked' }, 'blocked', 'all_runnable_blocked'],
    ['executing', { type: 'budget_exhausted' }, 'stopped', 'plan.stopped'],
    ['executing', { type: 'user_cancel' }, 'stopped', 'plan.stopped'],
    ['reviewing', { type: 'critique_found_issues' }, 'executing', 'plan.critique'],
    ['reviewing', { type: 'critique_passed' }, 'goal_met', 'plan.goal_met'],
    ['reviewing', { type: 'needs_replan' }, 'planning', 'plan.critique'],
    ['blocked', { type: 'dependency_resolved' }, 'executing', 'dependency_resolved'],
    ['blocked', { type: 'unresolvable' }, 'stopped', 'plan.stopped'],
    ['blocked', { type: 'user_cancel' }, 'stopped', 'plan.stopped'],
    // The rune table's executing runes that the diagram does not draw.
    ['executing', { type: 'task_assigned', taskId: 't1', agentId: 'a1' }, 'executing', 'plan.task_assigned'],
    ['executing', { type: 'task_started', taskId: 't1' }, 'executing', 'plan.task_started'],
  ];
  it.each(rows)('%s + %o -> %s (%s)', (from, event, to, kind) => {
    expectRow(autonomyLoop, at(from), event, to, kind);
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
  it('starts with the goal', () => {
    expect(autonomyLoop.initial(input)).toEqual({ value: 'goal_received', goal: 'ship the release', tasksCompleted: 0 });
  });

  it('folds a run to goal_met into its context', () => {
    const events: AutonomyLoopEvent[] = [
      { type: 'decompose_goal', planId: 'p1', tasks: [{ id: 't1' }, { id: 't2' }] },
      { type: 'auto_start' },
      { type: 'task_assigned', taskId: 't1', agentId: 'a1' },
      { type: 'task_started', taskId: 't1' },
      { type: 'task_completed', morePending: true, taskId: 't1' },
      { type: 'task_completed', morePending: false, taskId: 't2', evidence: { tests: 'green' } },
      { type: 'all_tasks_terminal' },
      { type: 'critique_found_issues', findings: ['changelog missing'] },
      { type: 'all_tasks_terminal' },
      { type: 'critique_passed', summary: 'released' },
    ];
    expect(events.reduce((s, e) => autonomyLoop.transition(s, e), autonomyLoop.initial(input))).toEqual({
      value: 'goal_met',
      goal: 'ship the release',
      planId: 'p1',
      tasks: [{ id: 't1' }, { id: 't2' }],
      tasksCompleted: 2,
      findings: ['changelog missing'],
      summary: 'released',
    });
  });

  it("the last task's completion is a plan.task_completed too, whatever morePending says", () => {
    expect(autonomyLoop.step(at('executing'), { type: 'task_completed', morePending: false })).toMatchObject({
      accepted: true,
      kind: 'plan.task_completed',
      state: { value: 'executing', tasksCompleted: 1 },
    });
  });

  it.each([
    ['executing', { type: 'user_cancel', reason: 'changed my mind' }, 'changed my mind'],
    ['executing', { type: 'user_cancel' }, 'user_cancel'],
    ['executing', { type: 'budget_exhausted' }, 'budget_exhausted'],
    ['blocked', { type: 'unresolvable', reason: 'API gone' }, 'API gone'],
    ['blocked', { type: 'unresolvable' }, 'unresolvable'],
  ] as Array<[Name, AutonomyLoopEvent, string]>)('in %s, %o stops with reason %j', (from, event, reason) => {
    expect(autonomyLoop.transition(at(from), event)).toMatchObject({ value: 'stopped', reason });
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
});

describe('autonomyLoop: rejections', () => {
  it('every terminal state rejects every event with "terminal state"', () => {
    expectTerminalsAbsorb(autonomyLoop, samples, input);
  });

  it('runs no task before the plan is approved', () => {
    expectNotAllowed(autonomyLoop, at('planning'), { type: 'task_assigned', taskId: 't1', agentId: 'a1' }, 'event "task_assigned" is not allowed in state "planning"');
  });

  it('meets the goal only through a passing critique', () => {
    const executing = at('executing');
    expect(autonomyLoop.step(executing, { type: 'critique_passed' })).toMatchObject({
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
    const completed = stepUnknown(autonomyLoop, at('executing'), { type: 'task_completed' });
    expect(!completed.accepted && completed.reason).toMatchInlineSnapshot(
      `"invalid "task_completed" event: morePending: Invalid input: expected boolean, received undefined"`,
    );
  });

  it('rejects an unknown event type by name', () => {
    const step = stepUnknown(autonomyLoop, at('executing'), { type: 'task.completed' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"unknown event type "task.completed" for machine "autonomy-loop"; expected one of: decompose_goal, plan_approved, auto_start, plan_rejected, user_cancel, all_tasks_terminal, task_assigned, task_started, task_completed, all_runnable_blocked, budget_exhausted, critique_found_issues, critique_passed, needs_replan, dependency_resolved, unresolvable"`,
    );
  });

  it('needs a goal', () => {
    expect(autonomyLoop.schemas.input.safeParse({ goal: '' }).success).toBe(false);
  });

  it('never throws out of transition, even for hand-built events that skip validation', () => {
    const bad = [null, undefined, 42, {}, { type: 'user_cancel', reason: 7 }, { type: 'valueOf' }, { type: '__proto__' }];
    expectNeverThrows(
      autonomyLoop,
      autonomyLoop.states.map((value) => at(value as Name)),
      bad,
    );
  });
});

describe('autonomyLoop: properties', () => {
  const text = fc.string({ maxLength: 12 });
  const id = fc.string({ minLength: 1, maxLength: 8 });
  const json = fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<NonNullable<AutonomyLoopState['findings']>>;
  const event: fc.Arbitrary<AutonomyLoopEvent> = fc.oneof(
    fc.record({ type: fc.constant('decompose_goal' as const), planId: id, tasks: fc.array(json, { maxLength: 3 }) }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'plan_approved' as const }),
    fc.constant({ type: 'auto_start' as const }),
    fc.record({ type: fc.constant('plan_rejected' as const), changes: json }, { requiredKeys: ['type'] }),
    fc.record({ type: fc.constant('user_cancel' as const), reason: text }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'all_tasks_terminal' as const }),
    fc.record({ type: fc.constant('task_assigned' as const), taskId: id, agentId: id }),
    fc.record({ type: fc.constant('task_started' as const), taskId: id }),
    fc.record(
      { type: fc.constant('task_completed' as const), morePending: fc.boolean(), taskId: id, result: json, evidence: json },
      { requiredKeys: ['type', 'morePending'] },
    ),
    fc.constant({ type: 'all_runnable_blocked' as const }),
    fc.constant({ type: 'budget_exhausted' as const }),
    fc.record({ type: fc.constant('critique_found_issues' as const), findings: json }, { requiredKeys: ['type'] }),
    fc.record({ type: fc.constant('critique_passed' as const), summary: text }, { requiredKeys: ['type'] }),
    fc.record({ type: fc.constant('needs_replan' as const), findings: json }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'dependency_resolved' as const }),
    fc.record({ type: fc.constant('unresolvable' as const), reason: text }, { requiredKeys: ['type'] }),
  );

  it('random event sequences keep every machine property; the goal is kept and a stop says why', () => {
    checkMachineProperties(autonomyLoop, {
      event,
      input: fc.string({ minLength: 1, maxLength: 12 }).map((goal) => ({ goal })),
      onAccepted: (prev, e, next) => {
        expect(next.goal).toBe(prev.goal);
        expect(next.tasksCompleted).toBe(prev.tasksCompleted + (e.type === 'task_completed' ? 1 : 0));
        if (next.value === 'stopped') expect(next.reason).toBeDefined();
      },
    });
  });
});
