import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { edgesOf, runePayloadSchemas, stepUnknown, turnEngine, type Edge, type TurnEngineEvent, type TurnEngineState } from '../../src/index.js';
import { checkMachineProperties, expectNeverThrows, expectNotAllowed, expectRow, stateAt } from '../support/machine-properties.js';
import { drawnEdges, eventsBeforeParens, expectRuneKind, missingDrawnEdges, readSeed, runeKindRows } from '../support/seed-diagram.js';

type Name = TurnEngineState['value'];
const seed = readSeed('003_4203c785f6246465.txt');
const at = (value: Name, context: Partial<TurnEngineState> = {}) => stateAt(turnEngine, value, context);

describe('turnEngine: seed 003 diagram, edge by edge', () => {
  // Where each step lands: an ending (`completed`, `interrupted`, `error`) moves on to `idle` in the
  // same step (the seed's internal transitions), so its rune is the turn's last.
  const rows: Array<[Name, TurnEngineEvent, Name, string]> = [
    ['idle', { type: 'start_turn', input: 'hi' }, 'streaming', 'turn.started'],
    ['streaming', { type: 'assistant_delta', content: 'He' }, 'streaming', 'turn.assistant_delta'],
    ['streaming', { type: 'tool_calls_received', callIds: ['c1'] }, 'tool_executing', 'turn.tool_calls_received'],
    ['streaming', { type: 'response_done' }, 'idle', 'turn.completed'],
    ['streaming', { type: 'interrupt', reason: 'user' }, 'idle', 'turn.interrupted'],
    ['streaming', { type: 'steer', input: 'shorter' }, 'idle', 'turn.interrupted'],
    ['streaming', { type: 'stream_error', error: '529 overloaded' }, 'idle', 'turn.error'],
    ['tool_executing', { type: 'tools_finished', more: true }, 'streaming', 'turn.tools_finished'],
    ['tool_executing', { type: 'tools_finished', more: false }, 'idle', 'turn.completed'],
    ['tool_executing', { type: 'interrupt' }, 'idle', 'turn.interrupted'],
    ['tool_executing', { type: 'tool_crash', error: 'sandbox died' }, 'idle', 'turn.error'],
    // A turn an older log left in an ending state, and such a log's finalize after an ending that now lands on idle.
    ['interrupted', { type: 'turn_finalized' }, 'idle', 'turn_finalized'],
    ['completed', { type: 'turn_finalized' }, 'idle', 'turn_finalized'],
    ['error', { type: 'turn_finalized' }, 'idle', 'turn_finalized'],
    ['idle', { type: 'turn_finalized' }, 'idle', 'turn_finalized'],
  ];
  it.each(rows)('%s + %o -> %s (%s)', (from, event, to, kind) => {
    expectRow(turnEngine, at(from), event, to, kind);
  });

  it('an empty answer fallen over from (model_call_spent, ours) stays streaming and counts as a response', () => {
    expectRow(turnEngine, at('streaming'), { type: 'model_call_spent', usage: { inputTokens: 100 }, cost: 0.1 }, 'streaming', 'turn.model_call_spent');
    const after = turnEngine.transition(at('streaming'), { type: 'model_call_spent', usage: { inputTokens: 100 }, cost: 0.1 });
    expect(after.turnUsage).toMatchObject({ inputTokens: 100, modelCalls: 1, toolCalls: 0, cost: 0.1 });
    expect(edgesOf(turnEngine).find((e) => e.on === 'model_call_spent')).toMatchObject({ source: 'extension', note: expect.any(String) });
  });

  it('every drawn transition is in the table', () => {
    const drawn = drawnEdges(seed, '## TurnEngine State Machine');
    expect(drawn.length).toBe(12);
    expect(missingDrawnEdges(edgesOf(turnEngine), drawn, eventsBeforeParens)).toEqual([]);
  });
});

describe('turnEngine: seed 003 "Turn Events (Rune Kinds)"', () => {
  const heading = '### Turn Events (Rune Kinds)';
  // The seed's rows, each with the edges it names. "(internal, no rune)": the rune kind is the event type.
  const rows: Array<[string, string, Partial<Edge>]> = [
    ['idle -> streaming', 'turn.started', { from: 'idle', to: 'streaming' }],
    ['streaming (delta)', 'turn.assistant_delta', { from: 'streaming', to: 'streaming' }],
    ['streaming -> tool_executing', 'turn.tool_calls_received', { from: 'streaming', to: 'tool_executing' }],
    ['streaming -> completed', 'turn.completed', { from: 'streaming', to: 'completed' }],
    ['streaming -> interrupted', 'turn.interrupted', { from: 'streaming', to: 'interrupted' }],
    ['streaming -> error', 'turn.error', { from: 'streaming', to: 'error' }],
    ['tool_executing -> streaming', 'turn.tools_finished', { from: 'tool_executing', to: 'streaming' }],
    ['completed -> idle', '(internal, no rune)', { from: 'completed', to: 'idle' }],
    ['error -> idle', '(internal, no rune)', { from: 'error', to: 'idle' }],
  ];

  it('lists exactly the seed table', () => {
    expect(runeKindRows(seed, heading)).toEqual(rows.map(([where, kind]) => [where, kind]));
  });

  it.each(rows)('%s: %s', (_, kind, where) => {
    expectRuneKind(turnEngine, where, (edge) => (kind.startsWith('(internal') ? edge.on : kind));
  });

  it('takes the "(internal, no rune)" rows in the step that enters them: the ending is one rune, and the turn is idle with it', () => {
    expect(turnEngine.internal).toEqual({ completed: 'idle', error: 'idle', interrupted: 'idle' });
    const streaming = at('streaming', { output: 'Hi' });
    for (const event of [{ type: 'response_done' }, { type: 'stream_error', error: 'down' }, { type: 'interrupt', reason: 'user' }] as const) {
      const step = turnEngine.step(streaming, event);
      expect(step).toMatchObject({ accepted: true, state: { value: 'idle', output: 'Hi' } });
      // Idle at once: the next turn may start with no other rune between.
      expect(turnEngine.step(step.state, { type: 'start_turn', input: 'next' })).toMatchObject({ accepted: true, kind: 'turn.started' });
    }
    expect(turnEngine.toMermaid()).toContain('completed --> idle : (internal, no rune)');
  });

  it('spawns with the default kind: the seed names none', () => {
    expect(turnEngine.spawnKind).toBe('spawned');
  });
});

describe('turnEngine: context', () => {
  it('folds a turn with a tool round into its context', () => {
    const events: TurnEngineEvent[] = [
      { type: 'start_turn', input: 'list files' },
      { type: 'assistant_delta', content: 'Let me ' },
      { type: 'assistant_delta', content: 'look.' },
      { type: 'tool_calls_received', callIds: ['c1', 'c2'], usage: { inputTokens: 10, outputTokens: 4 }, model: 'm', cost: 0.5 },
      { type: 'tools_finished', more: true },
      { type: 'assistant_delta', content: ' Done.' },
      { type: 'response_done', usage: { inputTokens: 12, outputTokens: 7 }, model: 'm', cost: 0.25 },
    ];
    const end = events.reduce((s, e) => turnEngine.transition(s, e), turnEngine.initial());
    expect(end).toEqual({
      value: 'idle',
      turn: 1,
      input: 'list files',
      output: 'Let me look. Done.',
      messages: ['Let me look.', ' Done.'],
      callIds: ['c1', 'c2'],
      usage: { inputTokens: 12, outputTokens: 7 },
      // Summed over both responses: two model calls, the two tool calls asked for, both costs.
      turnUsage: { inputTokens: 22, outputTokens: 11, modelCalls: 2, toolCalls: 2, wallClockMs: 0, cost: 0.75 },
    });
  });

  it("keeps each model call's text as a message of its own: output and finalOutput are still their concatenation", () => {
    const steps: TurnEngineEvent[] = [
      { type: 'start_turn', input: 'what time is it?' },
      { type: 'assistant_delta', content: 'Let me look at the clock.' },
      { type: 'tool_calls_received', callIds: ['c1'] },
      { type: 'tools_finished', more: true },
      { type: 'assistant_delta', content: 'Done: "' },
      { type: 'assistant_delta', content: '12:00"' },
    ];
    const streaming = steps.reduce((s, e) => turnEngine.transition(s, e), turnEngine.initial());
    expect(streaming.messages).toEqual(['Let me look at the clock.', 'Done: "12:00"']);
    const done = turnEngine.step(streaming, { type: 'response_done' });
    expect(done).toMatchObject({
      accepted: true,
      kind: 'turn.completed',
      payload: { finalOutput: 'Let me look at the clock.Done: "12:00"', messages: ['Let me look at the clock.', 'Done: "12:00"'] },
    });
    // A call with no text is an empty message; the next turn starts with none of these.
    const silent = turnEngine.transition(turnEngine.transition(turnEngine.transition(done.state, { type: 'turn_finalized' }), { type: 'start_turn', input: 'and?' }), {
      type: 'tool_calls_received',
      callIds: ['c2'],
    });
    expect(silent.messages).toEqual(['']);
    expect(turnEngine.transition(silent, { type: 'tools_finished', more: false }).messages).toEqual(['']);
  });

  it('reads a turn.completed stored before messages were kept, and a turn hydrated from such a snapshot keeps its output', () => {
    const stored = { finalOutput: 'Hello', usage: { inputTokens: 1, outputTokens: 1, modelCalls: 1, toolCalls: 0, wallClockMs: 0 } };
    expect(runePayloadSchemas(turnEngine)['turn.completed'].safeParse(stored)).toMatchObject({ success: true, data: stored });
    // An older snapshot mid-turn: no messages, its output so far counts as one.
    const old: TurnEngineState = { value: 'streaming', turn: 1, input: 'hi', output: 'Hel', callIds: [], turnUsage: turnEngine.initial().turnUsage };
    const step = turnEngine.step(turnEngine.transition(old, { type: 'assistant_delta', content: 'lo' }), { type: 'response_done' });
    expect(step).toMatchObject({ accepted: true, payload: { finalOutput: 'Hello', messages: ['Hello'] } });
  });

  it('sums a response without usage as a model call with no tokens, and the next turn starts its usage from zero', () => {
    let s = turnEngine.transition(turnEngine.initial(), { type: 'start_turn', input: 'hi' });
    s = turnEngine.transition(s, { type: 'response_done' });
    expect(s.turnUsage).toEqual({ inputTokens: 0, outputTokens: 0, modelCalls: 1, toolCalls: 0, wallClockMs: 0 });
    s = turnEngine.transition(turnEngine.transition(s, { type: 'turn_finalized' }), { type: 'start_turn', input: 'again' });
    expect(s.turnUsage).toEqual(turnEngine.initial().turnUsage);
  });

  it("counts an interrupt's usage (a call that died with its process) in turnUsage; an interrupt without one adds nothing", () => {
    const round = [
      { type: 'start_turn', input: 'hi' },
      { type: 'tool_calls_received', callIds: ['c1'], usage: { inputTokens: 5, outputTokens: 2 } },
      { type: 'tools_finished', more: true },
    ] as const satisfies readonly TurnEngineEvent[];
    const streaming = round.reduce<TurnEngineState>((s, e) => turnEngine.transition(s, e), turnEngine.initial());
    const cut = turnEngine.step(streaming, { type: 'interrupt', reason: 'interrupted by restart', usage: { modelCalls: 1 } });
    expect(cut).toMatchObject({ accepted: true, kind: 'turn.interrupted', payload: { reason: 'interrupted by restart', partialOutput: '' } });
    expect(cut.state.turnUsage).toEqual({ inputTokens: 5, outputTokens: 2, modelCalls: 2, toolCalls: 1, wallClockMs: 0 });
    expect(turnEngine.transition(streaming, { type: 'interrupt', reason: 'user' }).turnUsage).toEqual(streaming.turnUsage);
  });

  it('keeps a steer for the next turn, which starts clean', () => {
    let s = turnEngine.transition(turnEngine.initial(), { type: 'start_turn', input: 'write a poem' });
    s = turnEngine.transition(s, { type: 'assistant_delta', content: 'Roses' });
    s = turnEngine.transition(s, { type: 'steer', input: 'make it a haiku' });
    expect(s).toMatchObject({ value: 'idle', output: 'Roses', reason: 'steered', steerInput: 'make it a haiku' });
    s = turnEngine.transition(s, { type: 'start_turn', input: s.steerInput! });
    expect(s).toMatchObject({ value: 'streaming', turn: 2, input: 'make it a haiku', output: '', callIds: [], turnUsage: turnEngine.initial().turnUsage });
    expect(s.steerInput).toBeUndefined();
  });

  it('records why a turn was interrupted or failed', () => {
    expect(turnEngine.transition(at('tool_executing'), { type: 'interrupt', reason: 'user pressed stop' })).toMatchObject({
      value: 'idle',
      reason: 'user pressed stop',
    });
    expect(turnEngine.transition(at('tool_executing'), { type: 'tool_crash', error: 'sandbox died' })).toMatchObject({ value: 'idle', error: 'sandbox died' });
  });
});

describe('turnEngine: rejections', () => {
  it('has no terminal state: every outcome is idle again in the same step', () => {
    expect(turnEngine.terminal).toEqual([]);
  });

  it('rejects an event that does not apply with the same object and a reason', () => {
    expectNotAllowed(turnEngine, at('idle'), { type: 'assistant_delta', content: 'x' }, 'event "assistant_delta" is not allowed in state "idle"');
  });

  it('starts no second turn while one runs', () => {
    const streaming = at('streaming');
    expect(turnEngine.step(streaming, { type: 'start_turn', input: 'again' })).toMatchObject({
      accepted: false,
      code: 'not_allowed',
      reason: 'event "start_turn" is not allowed in state "streaming"',
    });
  });

  it('steers only while streaming, as drawn', () => {
    const executing = at('tool_executing');
    expect(turnEngine.transition(executing, { type: 'steer', input: 'x' })).toBe(executing);
  });
});

describe('turnEngine: bad input', () => {
  it('names the field of an event that fails its schema', () => {
    const step = stepUnknown(turnEngine, at('streaming'), { type: 'tool_calls_received', callIds: [] });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(`"invalid "tool_calls_received" event: callIds: Too small: expected array to have >=1 items"`);
    const more = stepUnknown(turnEngine, at('tool_executing'), { type: 'tools_finished', more: 'yes' });
    expect(!more.accepted && more.reason).toMatchInlineSnapshot(`"invalid "tools_finished" event: more: Invalid input: expected boolean, received string"`);
  });

  it('rejects an unknown event type by name', () => {
    const step = stepUnknown(turnEngine, at('idle'), { type: 'start' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"unknown event type "start" for machine "turn-engine"; expected one of: start_turn, assistant_delta, tool_calls_received, response_done, model_call_spent, interrupt, steer, stream_error, tools_finished, tool_crash, turn_finalized"`,
    );
  });

  it('never throws out of transition, even for hand-built events that skip validation', () => {
    const bad = [null, undefined, 42, {}, { type: 'assistant_delta' }, { type: 'tools_finished' }, { type: '__proto__' }];
    expectNeverThrows(
      turnEngine,
      turnEngine.states.map((value) => at(value as Name)),
      bad,
    );
  });
});

describe('turnEngine: properties', () => {
  const text = fc.string({ maxLength: 12 });
  const event: fc.Arbitrary<TurnEngineEvent> = fc.oneof(
    text.map((input) => ({ type: 'start_turn' as const, input })),
    text.map((content) => ({ type: 'assistant_delta' as const, content })),
    fc.array(fc.string({ minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 3 }).map((callIds) => ({ type: 'tool_calls_received' as const, callIds })),
    fc
      .option(fc.dictionary(fc.string({ maxLength: 8 }), fc.nat()), { nil: undefined })
      .map((usage) => (usage === undefined ? { type: 'response_done' as const } : { type: 'response_done' as const, usage })),
    fc.option(text, { nil: undefined }).map((reason) => (reason === undefined ? { type: 'interrupt' as const } : { type: 'interrupt' as const, reason })),
    text.map((input) => ({ type: 'steer' as const, input })),
    text.map((error) => ({ type: 'stream_error' as const, error })),
    fc.boolean().map((more) => ({ type: 'tools_finished' as const, more })),
    text.map((error) => ({ type: 'tool_crash' as const, error })),
    fc.constant({ type: 'turn_finalized' as const }),
  );

  it('random event sequences keep every machine property, and turns only count up', () => {
    checkMachineProperties(turnEngine, {
      event,
      onAccepted: (prev, e, next) => {
        expect(next.turn).toBe(prev.turn + (e.type === 'start_turn' ? 1 : 0));
        if (e.type === 'assistant_delta') expect(next.output).toBe(prev.output + e.content);
      },
    });
  });
});
