import { NEVER, Observable, concat, filter, firstValueFrom, from, of, throwError } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { digestOf } from '../../../src/effects/agent/model-call-record.js';
import { checkInvariants, type Rune, type TurnEngineState } from '../../../src/index.js';
import { agentModel, type ModelCaller } from '../../../src/effects/agent/agent-model.js';
import { agentTurns } from '../../../src/effects/agent/agent-turns.js';
import { agentStreams } from '../../../src/index.js';
import type { ChainOutput, ModelPart, ModelRequest } from '../../../src/effects/llm/model-types.js';
import { createEngine, type Engine } from '../../../src/streams/engine.js';
import { memoryStore } from '../../../src/streams/memory-store.js';
import type { RuneStore } from '../../../src/streams/store.js';
import { storeLog } from '../../support/store-log.js';

/** A model caller that answers each call with the next of `answers`, recording the requests. */
function scriptedCaller(answers: readonly (() => Observable<ModelPart>)[]) {
  const requests: ModelRequest[] = [];
  let unsubscribed = 0;
  const call: ModelCaller = (request) => {
    const answer = answers[requests.length];
    requests.push(request);
    if (answer === undefined) return throwError(() => new Error(`no answer scripted for call ${requests.length}`));
    return new Observable<ChainOutput>((subscriber) => {
      let ended = false;
      const subscription = answer().subscribe({
        next: (part) => subscriber.next({ type: 'part', part }),
        error: (error: unknown) => ((ended = true), subscriber.error(error)),
        complete: () => ((ended = true), subscriber.complete()),
      });
      return () => {
        if (!ended) unsubscribed++; // unsubscribed before the answer ended: the request is aborted
        subscription.unsubscribe();
      };
    });
  };
  return { call, requests, unsubscribedEarly: () => unsubscribed };
}

const text =
  (...deltas: string[]) =>
  () =>
    from<ModelPart[]>([...deltas.map((t): ModelPart => ({ type: 'text-delta', text: t })), { type: 'finish', finishReason: 'stop', usage: { outputTokens: deltas.length } }]);
const toolCalls =
  (...calls: { id: string; name: string; input: unknown }[]) =>
  () =>
    from<ModelPart[]>([
      ...calls.map((c): ModelPart => ({ type: 'tool-call', toolCallId: c.id, toolName: c.name, input: c.input })),
      { type: 'finish', finishReason: 'tool-calls' },
    ]);

const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

/** An engine running the turns, a rune per delta (deltaFlushMs 0: these tests follow each delta). */
function start(caller: ModelCaller, store: RuneStore = memoryStore()) {
  const engine = createEngine({ store, epics: [agentModel({ call: caller, system: 'be kind' }, {}, { deltaFlushMs: 0 }), agentTurns()] });
  engines.push(engine);
  return engine;
}

/** The first rune of `stream` (stored or live) that `matches`. */
const runeWhere = (engine: Engine, stream: string, matches: (rune: Rune) => boolean): Promise<Rune> => firstValueFrom(engine.runes$(stream).pipe(filter(matches)));

/** Waits until the agent's turn is back to idle after `turns` turns. */
const turnsDone = (engine: Engine, agent: string, turns: number): Promise<unknown> =>
  firstValueFrom(engine.state$<TurnEngineState>(agentStreams('conv/c1', agent).turn).pipe(filter((s) => s.value === 'idle' && s.turn === turns)));

const kinds = async (store: RuneStore, stream: string): Promise<string[]> => (await store.read(stream)).map((r) => r.kind);

describe('agent turns: a turn stream is an agent', () => {
  it('a text answer: deltas as runes, the turn completes (idle again with its last rune), conversation and lifecycle follow', async () => {
    const store = memoryStore();
    const model = scriptedCaller([text('Hel', 'lo', '!')]);
    const engine = start(model.call, store);
    const a = agentStreams('conv/c1', 'a1');
    await engine.spawn(a.turn, 'turn-engine');
    await runeWhere(engine, a.root, (r) => r.to === 'active');
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'hi' });
    await turnsDone(engine, 'a1', 1);

    expect(await kinds(store, a.turn)).toEqual(['spawned', 'turn.started', 'turn.assistant_delta', 'turn.assistant_delta', 'turn.assistant_delta', 'turn.completed']);
    expect((await engine.snapshot<TurnEngineState>(a.turn))?.state).toMatchObject({ output: 'Hello!', usage: { outputTokens: 3 } });
    await runeWhere(engine, a.lifecycle, (r) => r.kind === 'turn.completed');
    expect(await kinds(store, a.lifecycle)).toEqual(['agent.spawning', 'agent.ready', 'turn.started', 'turn.completed']);
    // The conversation is sent no new_turn, nor the turn's end: its turns and usage are its agents', and no error in a row is cleared.
    expect(await kinds(store, a.root)).toEqual(['session.created', 'session.activated']);
    expect(model.requests[0]).toEqual({ system: 'be kind', messages: [{ role: 'user', content: 'hi' }], tools: {} });
    expect(checkInvariants(await storeLog(store))).toEqual([]);
  });

  it('a tool round: a call stream per call, and once every call is done the model gets the results', async () => {
    const store = memoryStore();
    const model = scriptedCaller([toolCalls({ id: 'c1', name: 'clock', input: {} }, { id: 'c2', name: 'add', input: { a: 1, b: 2 } }), text('It is noon; 3.')]);
    const engine = start(model.call, store);
    const a = agentStreams('conv/c1', 'a1');
    await engine.spawn(a.turn, 'turn-engine');
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'time? 1+2?' });
    // The tools' side, by hand here: each call runs and succeeds.
    for (const [callId, output] of [
      ['c1', '12:00'],
      ['c2', 3],
    ] as const) {
      await runeWhere(engine, a.call(callId), (r) => r.kind === 'tool.call');
      await engine.dispatch(a.call(callId), { type: 'no_approval_needed' });
      await engine.dispatch(a.call(callId), { type: 'success', output });
    }
    await turnsDone(engine, 'a1', 1);

    expect(await kinds(store, a.turn)).toEqual(['spawned', 'turn.started', 'turn.tool_calls_received', 'turn.tools_finished', 'turn.assistant_delta', 'turn.completed']);
    const finished = (await store.read(a.turn)).find((rune) => rune.kind === 'turn.tools_finished');
    expect(finished?.payload).toEqual({
      callIds: ['c1', 'c2'],
      resultSummaries: [
        { callId: 'c1', status: 'success' },
        { callId: 'c2', status: 'success' },
      ],
    });
    expect(model.requests[1]!.messages).toEqual([
      { role: 'user', content: 'time? 1+2?' },
      {
        role: 'assistant',
        content: [
          { type: 'tool-call', toolCallId: 'c1', toolName: 'clock', input: {} },
          { type: 'tool-call', toolCallId: 'c2', toolName: 'add', input: { a: 1, b: 2 } },
        ],
      },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: 'c1', toolName: 'clock', output: { type: 'json', value: '12:00' } },
          { type: 'tool-result', toolCallId: 'c2', toolName: 'add', output: { type: 'json', value: 3 } },
        ],
      },
    ]);
    expect(checkInvariants(await storeLog(store))).toEqual([]);
  });

  it('interrupting a tool round cancels every call not done: the next model call sees no orphan call', async () => {
    const store = memoryStore();
    const model = scriptedCaller([toolCalls({ id: 'c1', name: 'slow', input: {} }, { id: 'c2', name: 'risky', input: {} }), text('ok')]);
    const engine = start(model.call, store);
    const a = agentStreams('conv/c1', 'a1');
    await engine.spawn(a.turn, 'turn-engine');
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'go' });
    await runeWhere(engine, a.call('c2'), (r) => r.kind === 'tool.call');
    await engine.dispatch(a.call('c1'), { type: 'no_approval_needed' }); // executing
    await engine.dispatch(a.call('c2'), { type: 'requires_approval' }); // waiting for a person
    await engine.dispatch(a.turn, { type: 'interrupt', reason: 'user stop' });
    await turnsDone(engine, 'a1', 1);

    for (const callId of ['c1', 'c2']) {
      expect((await runeWhere(engine, a.call(callId), (r) => r.kind === 'tool.result')).event).toEqual({ type: 'cancelled', reason: 'user stop' });
    }
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'again' });
    await turnsDone(engine, 'a1', 2);
    const tool = model.requests[1]!.messages.find((m) => m.role === 'tool');
    expect(tool).toEqual({
      role: 'tool',
      content: [
        { type: 'tool-result', toolCallId: 'c1', toolName: 'slow', output: { type: 'error-text', value: 'cancelled: user stop' } },
        { type: 'tool-result', toolCallId: 'c2', toolName: 'risky', output: { type: 'error-text', value: 'cancelled: user stop' } },
      ],
    });
    expect(checkInvariants(await storeLog(store))).toEqual([]);
  });

  it('interrupting while the model streams unsubscribes the call (aborting its request) and keeps the partial text', async () => {
    const store = memoryStore();
    const model = scriptedCaller([() => concat(of<ModelPart>({ type: 'text-delta', text: 'Once upon' }), NEVER), text('Fine.')]);
    const engine = start(model.call, store);
    const a = agentStreams('conv/c1', 'a1');
    await engine.spawn(a.turn, 'turn-engine');
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'a story' });
    await runeWhere(engine, a.turn, (r) => r.kind === 'turn.assistant_delta');
    await engine.dispatch(a.turn, { type: 'interrupt' });
    await turnsDone(engine, 'a1', 1);
    expect(model.unsubscribedEarly()).toBe(1);
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'shorter' });
    await turnsDone(engine, 'a1', 2);
    expect(model.requests[1]!.messages).toEqual([
      { role: 'user', content: 'a story' },
      { role: 'assistant', content: 'Once upon' },
      { role: 'user', content: 'shorter' },
    ]);
  });

  it('a steer interrupts the answer and starts the next turn with its input', async () => {
    const model = scriptedCaller([() => concat(of<ModelPart>({ type: 'text-delta', text: 'Long' }), NEVER), text('Brief.')]);
    const engine = start(model.call);
    const a = agentStreams('conv/c1', 'a1');
    await engine.spawn(a.turn, 'turn-engine');
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'explain' });
    await runeWhere(engine, a.turn, (r) => r.kind === 'turn.assistant_delta');
    await engine.dispatch(a.turn, { type: 'steer', input: 'be brief' });
    await turnsDone(engine, 'a1', 2);
    expect(model.requests[1]!.messages.at(-1)).toEqual({ role: 'user', content: 'be brief' });
    expect((await engine.snapshot<TurnEngineState>(a.turn))?.state.output).toBe('Brief.');
  });

  it('a failed model call ends the turn in error; the agent hears it and is ready for the next turn', async () => {
    const model = scriptedCaller([() => throwError(() => new Error('all providers failed: a: 500'))]);
    const engine = start(model.call);
    const a = agentStreams('conv/c1', 'a1');
    await engine.spawn(a.turn, 'turn-engine');
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'hi' });
    await turnsDone(engine, 'a1', 1);
    // It records what the failed call was sent: the transcript up to the turn's start.
    expect((await runeWhere(engine, a.turn, (r) => r.kind === 'turn.error')).event).toEqual({
      type: 'stream_error',
      error: 'all providers failed: a: 500',
      request: { upTo: 2, system: { digest: digestOf('be kind'), value: 'be kind' }, tools: { digest: digestOf({}), value: {} } },
    });
    expect(await runeWhere(engine, a.lifecycle, (r) => r.kind === 'turn.error')).toMatchObject({ to: 'idle', event: { error: 'all providers failed: a: 500' } });
  });

  it('a paused conversation takes no new turn: the start is refused (held), nothing appended, the model not called', async () => {
    const model = scriptedCaller([]);
    const store = memoryStore();
    const engine = start(model.call, store);
    const a = agentStreams('conv/c1', 'a1');
    await engine.spawn(a.turn, 'turn-engine');
    await runeWhere(engine, a.root, (r) => r.to === 'active');
    await engine.dispatch(a.root, { type: 'pause_requested', reason: 'lunch' });
    expect(await engine.dispatch(a.turn, { type: 'start_turn', input: 'hi' })).toMatchObject({ accepted: false, code: 'held' });
    expect(await kinds(store, a.turn)).toEqual(['spawned']);
    expect(model.requests).toEqual([]);
  });

  it('after a restart, a turn whose model call died with the process is interrupted, and the agent is ready again', async () => {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    const before = start(scriptedCaller([() => NEVER]).call, kept);
    const a = agentStreams('conv/c1', 'a1');
    await before.spawn(a.turn, 'turn-engine');
    await before.dispatch(a.turn, { type: 'start_turn', input: 'hi' });
    await runeWhere(before, a.lifecycle, (r) => r.to === 'running_turn');
    await before.close(); // the process dies mid-answer

    const after = start(scriptedCaller([text('Back.')]).call, kept);
    await turnsDone(after, 'a1', 1);
    expect((await runeWhere(after, a.turn, (r) => r.kind === 'turn.interrupted')).event).toEqual({
      type: 'interrupt',
      reason: 'interrupted by restart',
      usage: { modelCalls: 1 },
    });
    await runeWhere(after, a.lifecycle, (r) => r.kind === 'turn.interrupted');
    expect((await after.snapshot(a.lifecycle))?.state).toMatchObject({ value: 'idle' });
    expect(checkInvariants(await storeLog(store))).toEqual([]);
  });

  it('after a restart, the model call that died with the process counts in the usage of the turn it interrupts (it may have been answered: sim seed 9)', async () => {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    // A tool round answered and recorded, then a second call that streams its text and dies with the process.
    const tool = toolCalls({ id: 'c1', name: 'clock', input: {} });
    const before = start(scriptedCaller([tool, () => concat(of<ModelPart>({ type: 'text-delta', text: 'It is ' }), NEVER)]).call, kept);
    const a = agentStreams('conv/c1', 'a1');
    await before.spawn(a.turn, 'turn-engine');
    await before.dispatch(a.turn, { type: 'start_turn', input: 'what time is it?' });
    await runeWhere(before, a.call('c1'), (r) => r.kind === 'tool.call');
    await before.dispatch(a.call('c1'), { type: 'no_approval_needed' });
    await before.dispatch(a.call('c1'), { type: 'success', output: 'noon' });
    await runeWhere(before, a.turn, (r) => r.kind === 'turn.assistant_delta');
    await before.close(); // the process dies mid-answer

    const after = start(scriptedCaller([]).call, kept);
    const interrupted = await runeWhere(after, a.lifecycle, (r) => r.kind === 'turn.interrupted');
    expect(interrupted.event).toMatchObject({ reason: 'interrupted by restart', usage: { modelCalls: 2, toolCalls: 1 } });
    expect(checkInvariants(await storeLog(store))).toEqual([]);
  });

  it('after a restart, an agent whose turn had ended (its last rune durable) but who never heard of it is told, once, with the usage its ending carries', async () => {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    // The log a process left when it died just after the turn's ending: no epic had told the agent or the conversation.
    const bare = createEngine({ store: kept });
    const a = agentStreams('conv/c1', 'a1');
    await bare.spawn(a.root, 'conversation', { conversationId: 'c1' });
    await bare.dispatch(a.root, { type: 'agent_ready', rootAgentId: 'a1' });
    await bare.spawn(a.lifecycle, 'agent-lifecycle', { agentId: 'a1' });
    await bare.dispatch(a.lifecycle, { type: 'init_complete' });
    await bare.spawn(a.turn, 'turn-engine', { agentId: 'a1' });
    await bare.dispatch(a.turn, { type: 'start_turn', input: 'hi' });
    await bare.dispatch(a.lifecycle, { type: 'turn_assigned', turnId: '1' });
    await bare.dispatch(a.turn, { type: 'assistant_delta', content: 'Hello.' });
    expect(await bare.dispatch(a.turn, { type: 'response_done', usage: { outputTokens: 3 } })).toMatchObject({ accepted: true, rune: { to: 'idle' } });
    await bare.close();

    const after = start(scriptedCaller([]).call, kept);
    const told = await runeWhere(after, a.lifecycle, (r) => r.kind === 'turn.completed');
    expect(told.event).toMatchObject({ type: 'turn_completed', usage: { outputTokens: 3, modelCalls: 1 } });
    // Told once: a second engine on the same log finds the agent idle and tells nothing again.
    await after.close();
    const again = start(scriptedCaller([]).call, kept);
    await new Promise((resolve) => setTimeout(resolve, 50));
    await again.close();
    expect((await kinds(store, a.lifecycle)).filter((kind) => kind === 'turn.completed')).toHaveLength(1);
    expect(checkInvariants(await storeLog(store))).toEqual([]);
  });

  it('gives each call its own stream when a provider reuses call ids across responses (call_0, call_0, ...)', async () => {
    const store = memoryStore();
    const model = scriptedCaller([toolCalls({ id: 'call_0', name: 'clock', input: {} }), text('noon'), toolCalls({ id: 'call_0', name: 'clock', input: {} }), text('one')]);
    const engine = start(model.call, store);
    const a = agentStreams('conv/c1', 'a1');
    await engine.spawn(a.turn, 'turn-engine');
    for (const [turn, callId, output] of [
      [1, 'call_0', '12:00'],
      [2, 'call_0-2', '13:00'],
    ] as const) {
      await engine.dispatch(a.turn, { type: 'start_turn', input: 'time?' });
      await runeWhere(engine, a.call(callId), (r) => r.kind === 'tool.call');
      await engine.dispatch(a.call(callId), { type: 'no_approval_needed' });
      await engine.dispatch(a.call(callId), { type: 'success', output });
      await turnsDone(engine, 'a1', turn);
    }
    const last = model.requests[3]!.messages;
    expect(last.filter((m) => m.role === 'tool').map((m) => JSON.stringify(m.content))).toEqual([
      JSON.stringify([{ type: 'tool-result', toolCallId: 'call_0', toolName: 'clock', output: { type: 'json', value: '12:00' } }]),
      JSON.stringify([{ type: 'tool-result', toolCallId: 'call_0-2', toolName: 'clock', output: { type: 'json', value: '13:00' } }]),
    ]);
    expect(checkInvariants(await storeLog(store))).toEqual([]);
  });
});
