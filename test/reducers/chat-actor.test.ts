import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chatActor, chatActorNotices, edgesOf, stepUnknown, type ChatActorEvent, type ChatActorState } from '../../src/index.js';
import { checkMachineProperties, expectNeverThrows, expectNotAllowed, expectRow, expectTerminalsAbsorb, stateAt } from '../support/machine-properties.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const at = (value: ChatActorState['value'], context: Partial<ChatActorState> = {}) => stateAt(chatActor, value, context);

const samples: ChatActorEvent[] = [
  { type: 'ProcessInteraction', userId },
  { type: 'Pause', reason: 'user asked' },
  { type: 'Cancel', reason: 'user_cancelled' },
  { type: 'Ping' },
  { type: 'Shutdown' },
  { type: 'InteractionComplete', success: true },
  { type: 'InactivityTimeout' },
  { type: 'Error', error: 'boom' },
];

describe('chatActor: seed 000 transition rules, row by row', () => {
  const rows: Array<[ChatActorState['value'], ChatActorEvent, ChatActorState['value']]> = [
    ['idle', { type: 'ProcessInteraction', userId }, 'running'],
    ['idle', { type: 'Pause' }, 'paused'],
    ['idle', { type: 'Cancel', reason: 'r' }, 'cancelled'],
    ['idle', { type: 'InactivityTimeout' }, 'completed'],
    ['running', { type: 'InteractionComplete', success: true }, 'idle'],
    ['running', { type: 'InteractionComplete', success: false, error: 'llm failed' }, 'error'],
    ['running', { type: 'Pause', reason: 'r' }, 'paused'],
    ['running', { type: 'Cancel', reason: 'r' }, 'cancelled'],
    ['paused', { type: 'ProcessInteraction', userId }, 'idle'],
    ['paused', { type: 'InactivityTimeout' }, 'completed'],
    // "Any | Error | Error" and "Any | Cancel | Cancelled", for every non-terminal state.
    ['idle', { type: 'Error', error: 'e' }, 'error'],
    ['running', { type: 'Error', error: 'e' }, 'error'],
    ['paused', { type: 'Error', error: 'e' }, 'error'],
    ['paused', { type: 'Cancel', reason: 'r' }, 'cancelled'],
  ];
  it.each(rows)('%s + %o -> %s', (from, event, to) => {
    expectRow(chatActor, at(from), event, to);
  });

  it('records the payloads in the context', () => {
    expect(chatActor.transition(at('idle'), { type: 'ProcessInteraction', userId })).toEqual({ value: 'running', userId });
    expect(chatActor.transition(at('running'), { type: 'InteractionComplete', success: false, error: 'rate limited' })).toEqual({ value: 'error', error: 'rate limited' });
    expect(chatActor.transition(at('idle'), { type: 'Cancel', reason: 'user_cancelled' })).toEqual({ value: 'cancelled', reason: 'user_cancelled' });
  });
});

describe('chatActor: DESIGN.md resolutions', () => {
  it.each(['idle', 'running', 'paused'] as const)('Ping and Shutdown in %s keep the state name but are accepted', (value) => {
    for (const type of ['Ping', 'Shutdown'] as const) {
      const state = at(value);
      const next = chatActor.transition(state, { type });
      expect(next).not.toBe(state);
      expect(next).toEqual(state);
    }
  });

  it('every terminal state rejects every event with "terminal state"', () => {
    expectTerminalsAbsorb(chatActor, samples);
  });

  it('rejects an event that does not apply with the same object and a reason', () => {
    expectNotAllowed(chatActor, at('idle'), { type: 'InteractionComplete', success: true }, 'event "InteractionComplete" is not allowed in state "idle"');
  });

  it('the table has no row from a terminal state', () => {
    for (const edge of edgesOf(chatActor)) expect(chatActor.terminal).not.toContain(edge.from);
  });
});

describe('chatActor: bad input', () => {
  it('names the field of an event that fails its schema', () => {
    const step = stepUnknown(chatActor, at('idle'), { type: 'ProcessInteraction', userId: 'not-a-uuid' });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(`"invalid "ProcessInteraction" event: userId: Invalid UUID"`);
  });

  it('rejects an unknown event type by name', () => {
    const step = stepUnknown(chatActor, at('idle'), { type: 'Explode' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"unknown event type "Explode" for machine "chat-actor"; expected one of: ProcessInteraction, Pause, Cancel, Ping, Shutdown, InteractionComplete, InactivityTimeout, Error"`,
    );
  });

  it('never throws out of transition, even for hand-built events that skip validation', () => {
    const bad = [null, undefined, 42, {}, { type: 'InteractionComplete' }, { type: 'toString' }, { type: '__proto__' }];
    expectNeverThrows(chatActor, [at('idle'), at('running'), at('paused'), at('error')], bad);
  });
});

describe('chatActor: properties', () => {
  const event: fc.Arbitrary<ChatActorEvent> = fc.oneof(
    fc.uuid({ version: 4 }).map((u) => ({ type: 'ProcessInteraction' as const, userId: u })),
    fc.option(fc.string(), { nil: undefined }).map((reason) => (reason === undefined ? { type: 'Pause' as const } : { type: 'Pause' as const, reason })),
    fc.string().map((reason) => ({ type: 'Cancel' as const, reason })),
    fc.constant({ type: 'Ping' as const }),
    fc.constant({ type: 'Shutdown' as const }),
    fc.boolean().map((success) => ({ type: 'InteractionComplete' as const, success })),
    fc.constant({ type: 'InactivityTimeout' as const }),
    fc.string().map((error) => ({ type: 'Error' as const, error })),
  );
  it('random event sequences keep every machine property', () => {
    checkMachineProperties(chatActor, { event });
  });
});

describe("chatActor: seed 000's drawing", () => {
  // The drawing is ASCII and partly contradicts the rules table; DESIGN.md: the table wins.
  // Read from the drawing, and each found in the generated diagram:
  const drawn: Array<[string, string, string]> = [
    ['idle', 'Pause', 'paused'],
    ['paused', 'ProcessInteraction', 'idle'], // "(resume)": the table's "Resume by processing interaction"
    ['idle', 'InactivityTimeout', 'completed'],
    ['running', 'InteractionComplete [success]', 'idle'], // "(success)"
    ['idle', 'Error', 'error'], // "from any state on error"
    ['running', 'Error', 'error'],
    ['paused', 'Error', 'error'],
    ['idle', 'Cancel', 'cancelled'], // "from any state on Cancel"
    ['running', 'Cancel', 'cancelled'],
    ['paused', 'Cancel', 'cancelled'],
  ];
  // Not taken, because the table says otherwise: "Created --ProcessInteraction--> Idle" (no Created
  // state; spawn enters Idle), "Idle --InteractionComplete--> Running" (the table: Idle +
  // ProcessInteraction -> Running) and an InteractionComplete arrow into Paused (the table: Pause).
  it.each(drawn)('%s --> %s : %s is in the generated diagram', (from, label, to) => {
    expect(chatActor.toMermaid().split('\n')).toContain(`  ${from} --> ${to} : ${label}`);
  });

  it('generates the whole diagram from the table', () => {
    expect(chatActor.toMermaid()).toMatchInlineSnapshot(`
      "stateDiagram-v2
        [*] --> idle
        idle --> running : ProcessInteraction
        idle --> paused : Pause
        idle --> cancelled : Cancel
        idle --> completed : InactivityTimeout
        running --> idle : InteractionComplete [success]
        running --> error : InteractionComplete [error]
        running --> paused : Pause
        running --> cancelled : Cancel
        paused --> idle : ProcessInteraction
        paused --> completed : InactivityTimeout
        idle --> error : Error
        running --> error : Error
        paused --> error : Error
        paused --> cancelled : Cancel
        idle --> idle : Ping
        running --> running : Ping
        paused --> paused : Ping
        idle --> idle : Shutdown
        running --> running : Shutdown
        paused --> paused : Shutdown
        error --> [*]
        cancelled --> [*]
        completed --> [*]"
    `);
  });
});

describe('chatActorNotices: seed 000 "SSE Events"', () => {
  const base = { stream: 'c', machine: 'chat-actor', at: 0 };
  it("gives the seed's state_changed example for idle -> running", () => {
    expect(chatActorNotices({ ...base, seq: 2, kind: 'ProcessInteraction', event: { type: 'ProcessInteraction', userId }, from: 'idle', to: 'running' })).toEqual([
      { type: 'state_changed', data: { from_state: 'idle', to_state: 'running', reason: 'Processing user interaction' } },
    ]);
  });

  it("adds the seed's stopped event on a terminal state, with the cancel reason", () => {
    const notices = chatActorNotices({ ...base, seq: 3, kind: 'Cancel', event: { type: 'Cancel', reason: 'user_cancelled' }, from: 'running', to: 'cancelled' });
    expect(notices[1]).toEqual({ type: 'stopped', data: { reason: 'user_cancelled', partial_response: '' } });
  });

  it('gives nothing for spawns, self-loops and other machines', () => {
    expect(chatActorNotices({ ...base, seq: 1, kind: 'spawned', event: { type: 'spawn' }, to: 'idle' })).toEqual([]);
    expect(chatActorNotices({ ...base, seq: 2, kind: 'Ping', event: { type: 'Ping' }, from: 'idle', to: 'idle' })).toEqual([]);
    expect(chatActorNotices({ ...base, machine: 'tool-call', seq: 2, kind: 'x', event: { type: 'x' }, from: 'a', to: 'b' })).toEqual([]);
  });
});
