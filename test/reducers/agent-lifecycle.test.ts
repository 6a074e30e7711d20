import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NO_USAGE, agentLifecycle, edgesOf, stepUnknown, type AgentLifecycleEvent, type AgentLifecycleInput, type AgentLifecycleState, type Edge } from '../../src/index.js';
import { checkMachineProperties, expectNeverThrows, expectNotAllowed, expectRow, expectTerminalsAbsorb, stateAt } from '../support/machine-properties.js';
import { drawnEdges, eventsBeforeParens, expectRuneKind, missingDrawnEdges, readSeed, runeKindRows } from '../support/seed-diagram.js';

type Name = AgentLifecycleState['value'];
const seed = readSeed('003_4203c785f6246465.txt');
const input: AgentLifecycleInput = { agentId: 'agent-1', role: 'coder', model: 'opus', parentId: 'conv-1' };
const at = (value: Name, context: Partial<AgentLifecycleState> = {}) => stateAt(agentLifecycle, value, context, input);

const samples: AgentLifecycleEvent[] = [
  { type: 'init_complete' },
  { type: 'init_error', error: 'no model' },
  { type: 'turn_assigned', turnId: 't1' },
  { type: 'turn_completed' },
  { type: 'turn_interrupted', reason: 'user' },
  { type: 'turn_error', error: 'stream died' },
  { type: 'kill', force: true },
  { type: 'parent_closed' },
  { type: 'budget_exhausted' },
];

describe('agentLifecycle: seed 003 diagram, edge by edge', () => {
  const rows: Array<[Name, AgentLifecycleEvent, Name, string]> = [
    ['spawning', { type: 'init_complete' }, 'idle', 'agent.ready'],
    ['spawning', { type: 'init_error', error: 'no model' }, 'failed', 'agent.failed'],
    ['idle', { type: 'turn_assigned', turnId: 't1' }, 'running_turn', 'turn.started'],
    ['idle', { type: 'kill' }, 'terminated', 'agent.terminated'],
    ['idle', { type: 'parent_closed' }, 'terminated', 'agent.terminated'],
    ['running_turn', { type: 'turn_completed' }, 'idle', 'turn.completed'],
    ['running_turn', { type: 'turn_interrupted' }, 'idle', 'turn.interrupted'],
    ['running_turn', { type: 'turn_error' }, 'idle', 'turn.error'],
    ['running_turn', { type: 'kill', force: true }, 'terminated', 'agent.terminated'],
    ['idle', { type: 'budget_exhausted' }, 'terminated', 'agent.terminated'],
  ];
  it.each(rows)('%s + %o -> %s (%s)', (from, event, to, kind) => {
    expectRow(agentLifecycle, at(from), event, to, kind);
  });

  it('every drawn transition is in the table', () => {
    const drawn = drawnEdges(seed, '## Agent Lifecycle State Machine');
    expect(drawn.length).toBe(9);
    expect(missingDrawnEdges(edgesOf(agentLifecycle), drawn, eventsBeforeParens)).toEqual([]);
  });
});

describe('agentLifecycle: seed 003 "Agent Events (Rune Kinds)"', () => {
  const heading = '### Agent Events (Rune Kinds)';
  // "running_turn -> idle" names turn_completed's kind; its interrupted and error edges carry the
  // TurnEngine's own kinds (the seed's "(see TurnEngine)").
  const rows: Array<[string, string, Partial<Edge> | 'spawn']> = [
    ['[*] -> spawning', 'agent.spawning', 'spawn'],
    ['spawning -> idle', 'agent.ready', { from: 'spawning', to: 'idle' }],
    ['spawning -> failed', 'agent.failed', { from: 'spawning', to: 'failed' }],
    ['idle -> running_turn', 'turn.started', { from: 'idle', to: 'running_turn' }],
    ['running_turn -> idle', 'turn.completed', { from: 'running_turn', to: 'idle', on: 'turn_completed' }],
    ['* -> terminated', 'agent.terminated', { to: 'terminated' }],
  ];

  it('lists exactly the seed table', () => {
    expect(runeKindRows(seed, heading)).toEqual(rows.map(([where, kind]) => [where, kind]));
  });

  it.each(rows)('%s: %s', (_, kind, where) => {
    expectRuneKind(agentLifecycle, where, kind);
  });

  it('"* -> terminated" reaches terminated from every live state', () => {
    const froms = new Set(
      edgesOf(agentLifecycle)
        .filter((e) => e.to === 'terminated')
        .map((e) => e.from),
    );
    expect([...froms].sort()).toEqual(['idle', 'running_turn', 'spawning']);
  });
});

describe('agentLifecycle: context', () => {
  it('starts spawning with the spawn input', () => {
    expect(agentLifecycle.initial(input)).toEqual({ value: 'spawning', ...input, usage: NO_USAGE });
  });

  it('records the turn, the errors and what terminated the agent', () => {
    const running = agentLifecycle.transition(at('idle'), { type: 'turn_assigned', turnId: 't7' });
    expect(running).toMatchObject({ value: 'running_turn', turnId: 't7' });
    expect(agentLifecycle.transition(running, { type: 'turn_error', error: 'stream died' })).toMatchObject({ value: 'idle', error: 'stream died' });
    expect(agentLifecycle.transition(at('spawning'), { type: 'init_error', error: 'no model' })).toMatchObject({ value: 'failed', error: 'no model' });
    expect(agentLifecycle.transition(running, { type: 'kill', force: true })).toMatchObject({ value: 'terminated', terminatedBy: 'kill' });
    expect(agentLifecycle.transition(at('idle'), { type: 'budget_exhausted', reason: 'agent budget exhausted: toolCalls 3 of 3' })).toMatchObject({
      terminatedBy: 'budget_exhausted',
      reason: 'agent budget exhausted: toolCalls 3 of 3',
    });
    expect(agentLifecycle.transition(at('idle'), { type: 'parent_closed' })).toMatchObject({ terminatedBy: 'parent_closed' });
  });

  it("adds each ended turn's usage to the agent's: the stats of its agent.terminated", () => {
    const turn = { ...NO_USAGE, inputTokens: 5, outputTokens: 2, modelCalls: 1, wallClockMs: 300 };
    let s = agentLifecycle.transition(at('idle'), { type: 'turn_assigned' });
    s = agentLifecycle.transition(s, { type: 'turn_completed', usage: turn });
    s = agentLifecycle.transition(agentLifecycle.transition(s, { type: 'turn_assigned' }), { type: 'turn_interrupted', reason: 'stop', usage: turn });
    s = agentLifecycle.transition(agentLifecycle.transition(s, { type: 'turn_assigned' }), { type: 'turn_error', error: 'boom', usage: { ...turn, cost: 0.1 } });
    s = agentLifecycle.transition(agentLifecycle.transition(s, { type: 'turn_assigned' }), { type: 'turn_completed' }); // no usage: nothing added
    expect(agentLifecycle.transition(s, { type: 'kill' }).usage).toEqual({ inputTokens: 15, outputTokens: 6, modelCalls: 3, toolCalls: 0, wallClockMs: 900, cost: 0.1 });
  });

  it("a turn assigned without an id does not keep the previous turn's id", () => {
    const again = agentLifecycle.transition(at('idle', { turnId: 't1' }), { type: 'turn_assigned' });
    expect(again.turnId).toBeUndefined();
  });
});

describe('agentLifecycle: extensions', () => {
  it.each([
    ['spawning', { type: 'kill' }],
    ['spawning', { type: 'parent_closed' }],
    ['running_turn', { type: 'parent_closed' }],
  ] as Array<[Name, AgentLifecycleEvent]>)('%s + %o -> terminated', (from, event) => {
    expect(agentLifecycle.step(at(from), event)).toMatchObject({ accepted: true, kind: 'agent.terminated', state: { value: 'terminated' } });
    expect(edgesOf(agentLifecycle).find((e) => e.from === from && e.on === event.type)).toMatchObject({ source: 'extension' });
  });
});

describe('agentLifecycle: rejections', () => {
  it('every terminal state rejects every event with "terminal state"', () => {
    expectTerminalsAbsorb(agentLifecycle, samples, input);
  });

  it.each([{ type: 'kill' as const }, { type: 'kill' as const, force: false }])('%o does not stop a running turn: it needs force', (event) => {
    expectNotAllowed(agentLifecycle, at('running_turn'), event, 'event "kill" is not allowed in state "running_turn": it needs force');
  });

  it('runs one turn at a time', () => {
    const running = at('running_turn');
    expect(agentLifecycle.step(running, { type: 'turn_assigned', turnId: 't2' })).toMatchObject({
      accepted: false,
      code: 'not_allowed',
      reason: 'event "turn_assigned" is not allowed in state "running_turn"',
    });
  });
});

describe('agentLifecycle: bad input', () => {
  it('names the field of an event that fails its schema', () => {
    const step = stepUnknown(agentLifecycle, at('running_turn'), { type: 'kill', force: 'yes' });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(`"invalid "kill" event: force: Invalid input: expected boolean, received string"`);
  });

  it('rejects an unknown event type by name', () => {
    const step = stepUnknown(agentLifecycle, at('idle'), { type: 'terminate' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"unknown event type "terminate" for machine "agent-lifecycle"; expected one of: init_complete, init_error, turn_assigned, turn_completed, turn_interrupted, turn_error, kill, parent_closed, budget_exhausted"`,
    );
  });

  it('never throws out of transition, even for hand-built events that skip validation', () => {
    const bad = [null, undefined, 42, {}, { type: 'kill', force: { toString: null } }, { type: 'hasOwnProperty' }, { type: '__proto__' }];
    expectNeverThrows(
      agentLifecycle,
      agentLifecycle.states.map((value) => at(value as Name)),
      bad,
    );
  });
});

describe('agentLifecycle: properties', () => {
  const text = fc.string({ maxLength: 12 });
  const id = fc.string({ minLength: 1, maxLength: 8 });
  const event: fc.Arbitrary<AgentLifecycleEvent> = fc.oneof(
    fc.constant({ type: 'init_complete' as const }),
    text.map((error) => ({ type: 'init_error' as const, error })),
    fc.record({ type: fc.constant('turn_assigned' as const), turnId: id }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'turn_completed' as const }),
    fc.record({ type: fc.constant('turn_interrupted' as const), reason: text }, { requiredKeys: ['type'] }),
    fc.record({ type: fc.constant('turn_error' as const), error: text }, { requiredKeys: ['type'] }),
    fc.record({ type: fc.constant('kill' as const), force: fc.boolean() }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'parent_closed' as const }),
    fc.constant({ type: 'budget_exhausted' as const }),
  );
  const inputs: fc.Arbitrary<AgentLifecycleInput> = fc.record({ agentId: id, role: text, model: text, parentId: id }, { requiredKeys: [] });

  it('random event sequences keep every machine property; the identity is kept', () => {
    checkMachineProperties(agentLifecycle, {
      event,
      input: inputs,
      onAccepted: (prev, _, next) => {
        expect([next.agentId, next.role, next.model, next.parentId]).toEqual([prev.agentId, prev.role, prev.model, prev.parentId]);
        expect(next.terminatedBy !== undefined).toBe(next.value === 'terminated');
      },
    });
  });
});
