import { filter, firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { digestOf, modelCallRecord, modelRequestOf } from '../../../src/effects/agent/model-call-record.js';
import { callOptionsOf } from '../../../src/effects/llm/provider-stream.js';
import { agentEpics, defineTool, scriptedModel } from '../../../src/agents.js';
import {
  agentStreams,
  createEngine,
  memoryStore,
  type AgentLifecycleState,
  type Engine,
  type Rune,
  type RuneOf,
  type ToolCallState,
  type TurnEngineState,
} from '../../../src/index.js';
import type { turnEngine } from '../../../src/reducers/turn-engine/machine.js';
import type { ModelRequest } from '../../../src/effects/llm/model-types.js';

type TurnRune = RuneOf<typeof turnEngine>;
const STREAM = 'conv/c1/agent/a1/turn';
const rune = (seq: number, event: Rune['event']): TurnRune => ({ stream: STREAM, seq, machine: 'turn-engine', kind: String(event.type), event, at: seq }) as TurnRune;
const clockSpec = { clock: { description: 'The time now.', inputSchema: { type: 'object', properties: {} } } } as const;
const request = (system: string | undefined, messages: ModelRequest['messages'] = []): ModelRequest => ({
  ...(system === undefined ? {} : { system }),
  messages,
  tools: clockSpec as unknown as ModelRequest['tools'],
});

describe('modelCallRecord: what a call records of its request', () => {
  it("records the transcript's position and each input's digest, its value only the first time the turn stream records it", () => {
    const history = [rune(1, { type: 'spawn' }), rune(2, { type: 'start_turn', input: 'hi' })];
    const first = modelCallRecord(request('be kind'), history);
    expect(first).toEqual({
      upTo: 2,
      system: { digest: digestOf('be kind'), value: 'be kind' },
      tools: { digest: digestOf(clockSpec), value: clockSpec },
    });
    history.push(rune(3, { type: 'response_done', request: first }), rune(4, { type: 'start_turn', input: 'again' }));
    // The same prompt and tools: their digests alone. A new prompt: its value, once.
    expect(modelCallRecord(request('be kind'), history)).toEqual({ upTo: 4, system: { digest: digestOf('be kind') }, tools: { digest: digestOf(clockSpec) } });
    expect(modelCallRecord(request('be brief'), history).system).toEqual({ digest: digestOf('be brief'), value: 'be brief' });
    expect(modelCallRecord(request(undefined), history)).not.toHaveProperty('system');
  });

  it('a digest is the same whatever order the keys were written in, and differs with the content', () => {
    expect(digestOf({ a: 1, b: [1, 2] })).toBe(digestOf({ b: [1, 2], a: 1 }));
    expect(digestOf({ a: 1 })).not.toBe(digestOf({ a: 2 }));
    expect(digestOf('x')).toMatch(/^[0-9a-f]{64}$/);
  });

  it('modelRequestOf: undefined for a rune that records no call, or whose recorded values were pruned', () => {
    const done = rune(3, { type: 'response_done', request: { upTo: 2, tools: { digest: digestOf(clockSpec) } } });
    const runes = [rune(2, { type: 'start_turn', input: 'hi' }), done];
    expect(modelRequestOf(runes, 2, new Map())).toBeUndefined();
    expect(modelRequestOf(runes, 3, new Map())).toBeUndefined(); // the tools' value is in no rune left
    expect(modelRequestOf([rune(3, { type: 'response_done' })], 3, new Map())).toBeUndefined(); // written before calls were recorded
  });
});

describe('a model call is recoverable from the log', () => {
  const a = agentStreams('conv/c1', 'a1');
  const clock = defineTool({ name: 'clock', description: 'The time now.', inputSchema: z.object({}), execute: () => '12:00' });
  const engines: Engine[] = [];
  afterEach(async () => {
    for (const engine of engines.splice(0)) await engine.close();
  });

  it("rebuilds each call's request from its turn stream and its calls' outcomes: the prompt and tools the model was sent, exactly", async () => {
    // Turn 1: a tool round, then the answer; turn 2: an answer. Three calls, one prompt and one tool set.
    const model = scriptedModel([{ text: 'Let me look.', toolCalls: [{ toolName: 'clock', input: {} }] }, { text: 'It is noon.' }, { text: 'Still noon.' }]);
    const store = memoryStore();
    const engine = createEngine({ store, epics: agentEpics({ model, tools: [clock], system: 'Answer briefly.' }) });
    engines.push(engine);
    await engine.spawn(a.turn, 'turn-engine');
    await firstValueFrom(engine.runes$(a.root).pipe(filter((r) => r.to === 'active')));
    for (const [n, input] of ['What time is it?', 'And now?'].entries()) {
      await firstValueFrom(engine.state$<AgentLifecycleState>(a.lifecycle).pipe(filter((s) => s.value === 'idle')));
      await engine.dispatch(a.turn, { type: 'start_turn', input });
      await firstValueFrom(engine.state$<TurnEngineState>(a.turn).pipe(filter((s) => s.value === 'idle' && s.turn === n + 1)));
    }
    const runes = (await store.read(a.turn)) as TurnRune[];
    const ends = runes.filter((r) => 'request' in r.event && r.event.request !== undefined);
    expect(ends.map((r) => r.event.type)).toEqual(['tool_calls_received', 'response_done', 'response_done']);
    // The prompt and the tools are stored once, by the first call; the later calls name their digests.
    expect(ends.map((r) => 'request' in r.event && r.event.request?.system?.value)).toEqual(['Answer briefly.', undefined, undefined]);
    const calls = new Map<string, ToolCallState>();
    for (const r of runes) {
      if (r.event.type !== 'tool_calls_received') continue;
      for (const callId of r.event.callIds) calls.set(callId, (await engine.snapshot<ToolCallState>(a.call(callId)))!.state);
    }
    expect(model.doStreamCalls).toHaveLength(3);
    for (const [i, end] of ends.entries()) {
      const rebuilt = modelRequestOf(runes, end.seq, calls)!;
      const sent = model.doStreamCalls[i]!;
      const options = await callOptionsOf(model, rebuilt, new AbortController().signal);
      expect(options.prompt).toEqual(sent.prompt);
      expect(options.tools).toEqual(sent.tools);
    }
  });
});
