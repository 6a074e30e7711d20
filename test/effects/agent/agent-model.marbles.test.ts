import { defer, from, of, throwError, type Observable } from 'rxjs';
import { marbleTest, type Marbles } from '../../support/marbles.js';
import { describe, expect, it } from 'vitest';
import type { EpicCommand, Rune, StreamHead, ToolCallState } from '../../../src/index.js';
import { headMatches } from '../../../src/streams/store.js';
import { agentModel, type ModelCaller } from '../../../src/effects/agent/agent-model.js';
import type { ChainOutput, ModelPart, ModelRequest } from '../../../src/effects/llm/model-types.js';
import { epicContext } from '../../support/epic-context.js';

/**
 * The `agentModel` epic alone, under `TestScheduler.run`: a hot observable of runes in, commands
 * out; the model caller returns cold observables; no engine, no store. The context answers `read`
 * and `snapshot` with Observables at once, so the call a rune asks for is subscribed in that
 * rune's frame, which is what the subscription windows below say.
 */

// --- runes of agent a1's turn stream, and what the model streams ------------------------------------

const TURN = 'conv/c1/agent/a1/turn';
const turnRune = (seq: number, event: Rune['event'], from: string, to: string, kind: string, stream = TURN): Rune => ({
  stream,
  seq,
  machine: 'turn-engine',
  kind,
  event,
  from,
  to,
  at: 0,
});
const started = (seq = 2, stream = TURN) => turnRune(seq, { type: 'start_turn', input: 'hi' }, 'idle', 'streaming', 'turn.started', stream);
const delta = (seq: number, content: string) => turnRune(seq, { type: 'assistant_delta', content }, 'streaming', 'streaming', 'turn.assistant_delta');
const interrupted = (seq: number, stream = TURN) => turnRune(seq, { type: 'interrupt', reason: 'user stop' }, 'streaming', 'interrupted', 'turn.interrupted', stream);
const steered = (seq: number) => turnRune(seq, { type: 'steer', input: 'be brief' }, 'streaming', 'interrupted', 'turn.interrupted');
const finalized = (seq: number, from: string, stream = TURN) => turnRune(seq, { type: 'turn_finalized' }, from, 'idle', 'turn_finalized', stream);

const part = (p: ModelPart): ChainOutput => ({ type: 'part', part: p });
const text = (t: string) => part({ type: 'text-delta', text: t });
const toolCall = (toolCallId: string, toolName: string, input: unknown) => part({ type: 'tool-call', toolCallId, toolName, input });
const finish = (finishReason: string, usage?: Record<string, number | undefined>) => part({ type: 'finish', finishReason, ...(usage === undefined ? {} : { usage }) });

/** The kinds of event that end a model call, and record what it was sent. */
const CALL_ENDS = new Set(['response_done', 'tool_calls_received', 'stream_error', 'model_call_spent']);
/**
 * What the model call made, as a command to the turn saying so; an event that ends the call
 * records what it was sent (checked in its own test: here, that it is there).
 */
const toTurn = (event: { readonly type: string } & Readonly<Record<string, unknown>>, stream = TURN): EpicCommand => ({
  stream,
  event: CALL_ENDS.has(event.type) && !('request' in event) ? { ...event, request: expect.objectContaining({ upTo: expect.any(Number) }) } : event,
  by: 'model',
});
/** What the epic decided itself (an interrupt, a request it could not build): no `by`. */
const fromEpic = (event: { readonly type: string } & Readonly<Record<string, unknown>>, stream = TURN): EpicCommand => ({ stream, event });

/**
 * A model caller answering call n with `answers[n]`, recording each request; and a context whose
 * `read` returns the runes of the stream seen so far on `runes$`, and whose `snapshot` finds the
 * calls' states in `calls`.
 */
function setup(
  m: Marbles,
  runes$: Observable<Rune>,
  answers: readonly Observable<ChainOutput>[],
  calls: Record<string, ToolCallState> = {},
  heads: readonly StreamHead[] = [],
) {
  const requests: ModelRequest[] = [];
  const call: ModelCaller = (request) => {
    requests.push(request);
    return answers[requests.length - 1] ?? throwError(() => new Error(`no answer for call ${requests.length}`));
  };
  const seen: Rune[] = [];
  runes$.subscribe((rune) => seen.push(rune));
  const context = epicContext(m.scheduler, {
    read: (stream) => defer(() => of(...seen.filter((rune) => rune.stream === stream))),
    snapshot: <S>(stream: string) => of(stream in calls ? { stream, seq: 4, state: calls[stream] as S } : undefined),
    streams: (query = {}) => from(heads.filter((head) => headMatches(head, query))),
  });
  return { requests, context, call };
}

/**
 * A turn whose first answer asks for the clock (frame 1), whose round is heard at frame 5 and
 * finished (`tools_finished`, back to streaming) at frame 8; the second answer is "Noon.".
 */
function toolRoundThenMore(m: Marbles) {
  const asked = { callId: 'c1', toolName: 'clock', arguments: {} };
  const round = turnRune(3, { type: 'tool_calls_received', callIds: ['c1'], calls: [asked] }, 'streaming', 'tool_executing', 'turn.tool_calls_received');
  const more = turnRune(4, { type: 'tools_finished', more: true }, 'tool_executing', 'streaming', 'turn.tools_finished');
  const runes = m.hot<Rune>('-s---r--f-------', { s: started(), r: round, f: more });
  const first = m.cold<ChainOutput>('-a-(f|)', { a: toolCall('c1', 'clock', {}), f: finish('tool-calls') });
  const second = m.cold<ChainOutput>('-x-(f|)', { x: text('Noon.'), f: finish('stop') });
  return { asked, runes, first, second };
}

describe('agentModel: a turn entering streaming calls the model; its answer becomes commands to the turn', () => {
  it('deltaFlushMs 0: text deltas become assistant_delta commands one for one (empty ones dropped), then response_done with the usage', () =>
    marbleTest((m) => {
      const runes = m.hot<Rune>('-s--------', { s: started() });
      const llm = m.cold<ChainOutput>('-a-e-b-(f|)', {
        a: text('Hel'),
        e: text(''),
        b: text('lo'),
        f: finish('stop', { inputTokens: 3, outputTokens: 2, reasoningTokens: undefined }),
      });
      const { call, context, requests } = setup(m, runes, [llm]);
      const commands = m.expectObservable(agentModel({ call, system: 'be kind' }, {}, { deltaFlushMs: 0 })(runes, context, undefined));
      commands.toBe('--a---b-d', {
        a: toTurn({ type: 'assistant_delta', content: 'Hel' }),
        b: toTurn({ type: 'assistant_delta', content: 'lo' }),
        // The turn's wall clock so far, on the scheduler: its turn.started rune is at 0.
        d: toTurn({ type: 'response_done', usage: { inputTokens: 3, outputTokens: 2 }, wallClockMs: 8 }),
      });
      m.expectSubscriptions(llm.subscriptions).toBe('-^------!');
      return () => expect(requests).toEqual([{ system: 'be kind', messages: [{ role: 'user', content: 'hi' }], tools: {} }]);
    }));

  it('tool calls become one tool_calls_received, at the end, with the callIds and what each call asked for', () =>
    marbleTest((m) => {
      const runes = m.hot<Rune>('-s--------', { s: started() });
      const llm = m.cold<ChainOutput>('-x-a-b-(f|)', {
        x: text('Checking.'),
        a: toolCall('c1', 'clock', {}),
        b: toolCall('c2', 'add', { a: 1, b: 2 }),
        f: finish('tool-calls'),
      });
      const { call, context } = setup(m, runes, [llm]);
      const commands = m.expectObservable(agentModel({ call })(runes, context, undefined));
      commands.toBe('--x-----r', {
        x: toTurn({ type: 'assistant_delta', content: 'Checking.' }),
        r: toTurn({
          type: 'tool_calls_received',
          callIds: ['c1', 'c2'],
          calls: [
            { callId: 'c1', toolName: 'clock', arguments: {} },
            { callId: 'c2', toolName: 'add', arguments: { a: 1, b: 2 } },
          ],
          wallClockMs: 8,
        }),
      });
      m.expectSubscriptions(llm.subscriptions).toBe('-^------!');
    }));

  it.each([
    ['an interrupt', interrupted(4)],
    ['a steer', steered(4)],
  ])('%s (the turn leaves streaming) unsubscribes the model call at that frame; deltas before it do not (deltaFlushMs 0)', (_name, leaving) =>
    marbleTest((m) => {
      const runes = m.hot<Rune>('-s--d-i---z', { s: started(), d: delta(3, 'Hel'), i: leaving, z: finalized(5, 'interrupted') });
      const llm = m.cold<ChainOutput>('-a-b----c-(f|)', { a: text('Hel'), b: text('lo'), c: text(' there'), f: finish('stop') });
      const { call, context, requests } = setup(m, runes, [llm]);
      const commands = m.expectObservable(agentModel({ call }, {}, { deltaFlushMs: 0 })(runes, context, undefined));
      commands.toBe('--a-b-------', { a: toTurn({ type: 'assistant_delta', content: 'Hel' }), b: toTurn({ type: 'assistant_delta', content: 'lo' }) });
      m.expectSubscriptions(llm.subscriptions).toBe('-^----!');
      return () => expect(requests).toHaveLength(1);
    }),
  );

  it("another agent's interrupt does not cut this agent's call (deltaFlushMs 0)", () =>
    marbleTest((m) => {
      const other = 'conv/c1/agent/a2/turn';
      const runes = m.hot<Rune>('-st--i-----', { s: started(), t: started(2, other), i: interrupted(3, other) });
      const mine = m.cold<ChainOutput>('-a--b-(f|)', { a: text('Hel'), b: text('lo'), f: finish('stop') });
      const theirs = m.cold<ChainOutput>('-x------(f|)', { x: text('Yo'), f: finish('stop') });
      const { call, context } = setup(m, runes, [mine, theirs]);
      const commands = m.expectObservable(agentModel({ call }, {}, { deltaFlushMs: 0 })(runes, context, undefined));
      commands.toBe('--ax-b-d', {
        a: toTurn({ type: 'assistant_delta', content: 'Hel' }),
        x: toTurn({ type: 'assistant_delta', content: 'Yo' }, other),
        b: toTurn({ type: 'assistant_delta', content: 'lo' }),
        d: toTurn({ type: 'response_done', wallClockMs: 7 }),
      });
      m.expectSubscriptions(mine.subscriptions).toBe('-^-----!');
      m.expectSubscriptions(theirs.subscriptions).toBe('--^--!');
    }));

  it('a failed model call becomes stream_error, with what was streamed before it', () =>
    marbleTest((m) => {
      const runes = m.hot<Rune>('-s-------', { s: started() });
      const llm = m.cold<ChainOutput>('-a--#', { a: text('Hel') }, new Error('all providers failed: model: HTTP 503'));
      const { call, context } = setup(m, runes, [llm]);
      const commands = m.expectObservable(agentModel({ call })(runes, context, undefined));
      commands.toBe('--a--e', {
        a: toTurn({ type: 'assistant_delta', content: 'Hel' }),
        e: toTurn({ type: 'stream_error', error: 'all providers failed: model: HTTP 503' }),
      });
      m.expectSubscriptions(llm.subscriptions).toBe('-^---!');
    }));

  it('a request that cannot be built (the log cannot be read) becomes stream_error, and the model is never called', () =>
    marbleTest((m) => {
      const runes = m.hot<Rune>('-s---', { s: started() });
      const llm = m.cold<ChainOutput>('-a|', { a: text('never') });
      const { call } = setup(m, runes, [llm]);
      const context = epicContext(m.scheduler, { read: () => throwError(() => new Error('SQLITE_IOERR: disk I/O error')) });
      const commands = m.expectObservable(agentModel({ call })(runes, context, undefined));
      commands.toBe('-e', { e: fromEpic({ type: 'stream_error', error: 'SQLITE_IOERR: disk I/O error' }) });
      m.expectSubscriptions(llm.subscriptions).toBe([]);
    }));

  it("the call's own commands (its breakers) pass through as they come, among the deltas", () =>
    marbleTest((m) => {
      const spawnBreaker: EpicCommand = { stream: 'provider/model', spawn: 'circuit-breaker', input: { failureThreshold: 3, successThreshold: 1, openTimeoutMs: 30_000 } };
      const success: EpicCommand = { stream: 'provider/model', event: { type: 'success' } };
      const runes = m.hot<Rune>('-s--------', { s: started() });
      const llm = m.cold<ChainOutput>('-a-(fkc|)', {
        a: text('Hi'),
        f: finish('stop'),
        k: { type: 'command', command: spawnBreaker },
        c: { type: 'command', command: success },
      });
      const { call, context } = setup(m, runes, [llm]);
      const commands = m.expectObservable(agentModel({ call })(runes, context, undefined));
      commands.toBe('--a-(kcd)', { a: toTurn({ type: 'assistant_delta', content: 'Hi' }), k: spawnBreaker, c: success, d: toTurn({ type: 'response_done', wallClockMs: 4 }) });
      m.expectSubscriptions(llm.subscriptions).toBe('-^--!');
    }));

  it("tools_finished{more: true} (tool_executing -> streaming) starts a second call, which sees the round's results", () =>
    marbleTest((m) => {
      const { asked, runes, first, second } = toolRoundThenMore(m);
      const { call, context, requests } = setup(m, runes, [first, second], {
        'conv/c1/agent/a1/call/c1': { ...asked, value: 'completed_result', output: '12:00', progressCount: 0 },
      });
      const commands = m.expectObservable(agentModel({ call })(runes, context, undefined));
      commands.toBe('----r----x-d', {
        r: toTurn({ type: 'tool_calls_received', callIds: ['c1'], calls: [asked], wallClockMs: 4 }),
        x: toTurn({ type: 'assistant_delta', content: 'Noon.' }),
        d: toTurn({ type: 'response_done', wallClockMs: 11 }),
      });
      m.expectSubscriptions(first.subscriptions).toBe('-^--!');
      m.expectSubscriptions(second.subscriptions).toBe('--------^--!');
      return () => {
        expect(requests).toHaveLength(2);
        expect(requests[1]!.messages).toEqual([
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'clock', input: {} }] },
          { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'clock', output: { type: 'json', value: '12:00' } }] },
        ]);
      };
    }));

  it('tools_finished while the conversation was suspended meanwhile (another turn used the budget up): no second call, the turn is interrupted saying why', () =>
    marbleTest((m) => {
      const { asked, runes, first, second } = toolRoundThenMore(m);
      const reason = 'conversation budget exhausted: modelCalls 4 of 4';
      const calls: Record<string, ToolCallState> = { 'conv/c1/agent/a1/call/c1': { ...asked, value: 'completed_result', output: '12:00', progressCount: 0 } };
      const { call, context, requests } = setup(m, runes, [first, second], calls);
      // Another agent's turn uses the budget up while this one's tool runs: the conversation is suspended at frame 6.
      m.scheduler.schedule(() => {
        calls['conv/c1'] = { value: 'suspended', reason, turns: 2, usage: { inputTokens: 0, outputTokens: 0, modelCalls: 4, toolCalls: 1, wallClockMs: 0 } } as never;
      }, 6);
      m.expectObservable(agentModel({ call })(runes, context, undefined)).toBe('----r---i', {
        r: toTurn({ type: 'tool_calls_received', callIds: ['c1'], calls: [asked], wallClockMs: 4 }),
        i: fromEpic({ type: 'interrupt', reason: `the conversation is suspended: ${reason}` }),
      });
      m.expectSubscriptions(second.subscriptions).toBe([]);
      return () => expect(requests).toHaveLength(1);
    }));

  it("tools_finished when another agent's running turn has had the limit's calls answered (not yet in the conversation's usage): no second call, interrupted with the budget's reason", () =>
    marbleTest((m) => {
      const { asked, runes, first, second } = toolRoundThenMore(m);
      const calls: Record<string, ToolCallState> = { 'conv/c1/agent/a1/call/c1': { ...asked, value: 'completed_result', output: '12:00', progressCount: 0 } };
      const none = { inputTokens: 0, outputTokens: 0, modelCalls: 0, toolCalls: 0, wallClockMs: 0 };
      // The conversation is active, its usage without a2's turn, which waits on its tools with 2 calls answered.
      calls['conv/c1'] = { value: 'active', turns: 2, usage: none } as never;
      const a2 = 'conv/c1/agent/a2/turn';
      calls[a2] = { value: 'tool_executing', turnUsage: { ...none, modelCalls: 2, toolCalls: 1 } } as never;
      const heads: StreamHead[] = [TURN, a2].map((stream) => ({ stream, machine: 'turn-engine', seq: 3, value: 'tool_executing', at: 0 }));
      const { call, context, requests } = setup(m, runes, [first, second], calls, heads);
      m.expectObservable(agentModel({ call }, { conversationBudget: { modelCalls: 2 } })(runes, context, undefined)).toBe('----r---i', {
        r: toTurn({ type: 'tool_calls_received', callIds: ['c1'], calls: [asked], wallClockMs: 4 }),
        i: fromEpic({ type: 'interrupt', reason: 'conversation budget exhausted: modelCalls 2 of 2' }),
      });
      m.expectSubscriptions(second.subscriptions).toBe([]);
      return () => expect(requests).toHaveLength(1);
    }));
});

describe("agentModel: a response's text deltas coalesced, at most one assistant_delta per deltaFlushMs", () => {
  it('the first delta at once; the deltas of each window as one when it ends; held text before response_done', () =>
    marbleTest((m) => {
      const runes = m.hot<Rune>('-s---------------------', { s: started() });
      const llm = m.cold<ChainOutput>('-a-b-c-----------d-(f|)', { a: text('Hel'), b: text('lo'), c: text(' there'), d: text('!'), f: finish('stop') });
      const { call, context } = setup(m, runes, [llm]);
      m.expectObservable(agentModel({ call }, {}, { deltaFlushMs: 10 })(runes, context, undefined)).toBe('--a---------b-------(dr)', {
        a: toTurn({ type: 'assistant_delta', content: 'Hel' }),
        b: toTurn({ type: 'assistant_delta', content: 'lo there' }),
        d: toTurn({ type: 'assistant_delta', content: '!' }),
        r: toTurn({ type: 'response_done', wallClockMs: 20 }),
      });
    }));

  it('by default a window is 50 ms, on the engine scheduler', () =>
    marbleTest((m) => {
      const runes = m.hot<Rune>('-s', { s: started() });
      const llm = m.cold<ChainOutput>('- a 28ms b 29ms c 39ms (f|)', { a: text('Hel'), b: text('lo'), c: text(' there'), f: finish('stop') });
      const { call, context } = setup(m, runes, [llm]);
      m.expectObservable(agentModel({ call })(runes, context, undefined)).toBe('-- a 49ms b 48ms (cr)', {
        a: toTurn({ type: 'assistant_delta', content: 'Hel' }),
        b: toTurn({ type: 'assistant_delta', content: 'lo' }),
        c: toTurn({ type: 'assistant_delta', content: ' there' }),
        r: toTurn({ type: 'response_done', wallClockMs: 101 }),
      });
    }));

  it('held text is appended before tool_calls_received, and before stream_error', () =>
    marbleTest((m) => {
      const runes = m.hot<Rune>('-s-------t------', { s: started(), t: started(2, 'conv/c1/agent/a2/turn') });
      const asking = m.cold<ChainOutput>('-a-b-(kf|)', { a: text('Let me'), b: text(' check.'), k: toolCall('c1', 'clock', {}), f: finish('tool-calls') });
      const failing = m.cold<ChainOutput>('-a-b-#', { a: text('I was'), b: text(' about to') }, new Error('HTTP 502'));
      const { call, context } = setup(m, runes, [asking, failing]);
      const other = 'conv/c1/agent/a2/turn';
      m.expectObservable(agentModel({ call }, {}, { deltaFlushMs: 10 })(runes, context, undefined)).toBe('--a---(br)x---(ye)', {
        a: toTurn({ type: 'assistant_delta', content: 'Let me' }),
        b: toTurn({ type: 'assistant_delta', content: ' check.' }),
        r: toTurn({ type: 'tool_calls_received', callIds: ['c1'], calls: [{ callId: 'c1', toolName: 'clock', arguments: {} }], wallClockMs: 6 }),
        x: toTurn({ type: 'assistant_delta', content: 'I was' }, other),
        y: toTurn({ type: 'assistant_delta', content: ' about to' }, other),
        e: toTurn({ type: 'stream_error', error: 'HTTP 502' }, other),
      });
    }));

  it.each([
    ['an interrupt', interrupted(4)],
    ['a steer', steered(4)],
  ])('%s drops the text a window held: the turn keeps what was appended, a prefix of the answer', (_name, leaving) =>
    marbleTest((m) => {
      const runes = m.hot<Rune>('-s--d-i---z', { s: started(), d: delta(3, 'Hel'), i: leaving, z: finalized(5, 'interrupted') });
      const llm = m.cold<ChainOutput>('-a-b----c-(f|)', { a: text('Hel'), b: text('lo'), c: text(' there'), f: finish('stop') });
      const { call, context } = setup(m, runes, [llm]);
      m.expectObservable(agentModel({ call }, {}, { deltaFlushMs: 10 })(runes, context, undefined)).toBe('--a--------', {
        a: toTurn({ type: 'assistant_delta', content: 'Hel' }),
      });
      m.expectSubscriptions(llm.subscriptions).toBe('-^----!');
    }),
  );
});

describe('agentModel with afterAssignment (as agentEpics runs it): a turn that starts waits for agentTurns', () => {
  const LIFECYCLE = 'conv/c1/agent/a1';
  const assigned: Rune = {
    stream: LIFECYCLE,
    seq: 3,
    machine: 'agent-lifecycle',
    kind: 'turn.started',
    event: { type: 'turn_assigned', turnId: '2' },
    from: 'idle',
    to: 'running_turn',
    at: 0,
  };

  it('calls the model only once the agent runs the turn (its lifecycle enters running_turn with it)', () =>
    marbleTest((m) => {
      const runes = m.hot<Rune>('-s--a------', { s: started(), a: assigned });
      const llm = m.cold<ChainOutput>('-x-(f|)', { x: text('Hi'), f: finish('stop') });
      const { call, context } = setup(m, runes, [llm]);
      const commands = m.expectObservable(agentModel({ call }, {}, { deltaFlushMs: 0, afterAssignment: true })(runes, context, undefined));
      commands.toBe('-----x-d', { x: toTurn({ type: 'assistant_delta', content: 'Hi' }), d: toTurn({ type: 'response_done', wallClockMs: 7 }) });
      m.expectSubscriptions(llm.subscriptions).toBe('----^--!');
    }));

  it('never calls the model for a turn agentTurns interrupts instead, nor for one assigned another turn id', () =>
    marbleTest((m) => {
      const other: Rune = { ...assigned, event: { type: 'turn_assigned', turnId: '1' } };
      const runes = m.hot<Rune>('-s--o--i---', { s: started(), o: other, i: interrupted(3) });
      const llm = m.cold<ChainOutput>('-x-(f|)', { x: text('Hi'), f: finish('stop') });
      const { call, context, requests } = setup(m, runes, [llm]);
      m.expectObservable(agentModel({ call }, {}, { deltaFlushMs: 0, afterAssignment: true })(runes, context, undefined)).toBe('-----------');
      m.expectSubscriptions(llm.subscriptions).toBe([]);
      return () => expect(requests).toEqual([]);
    }));
});
