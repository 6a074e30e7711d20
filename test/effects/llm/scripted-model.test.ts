import type { LanguageModelV4CallOptions, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { generateText, streamText } from 'ai';
import { describe, expect, it } from 'vitest';
import { ScriptExhaustedError, scriptedModel, type ScriptedModel } from '../../../src/agents.js';
import { wordDeltas } from '../../../src/effects/llm/scripted-model.js';

const call = (signal?: AbortSignal): LanguageModelV4CallOptions => ({
  prompt: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }],
  ...(signal === undefined ? {} : { abortSignal: signal }),
});

/** Reads a doStream call to its end: its parts, and the error that ended it, if any. */
async function read(model: ScriptedModel, options = call()): Promise<{ parts: LanguageModelV4StreamPart[]; error?: unknown }> {
  const { stream } = await model.doStream(options);
  const parts: LanguageModelV4StreamPart[] = [];
  try {
    for await (const part of stream) parts.push(part);
    return { parts };
  } catch (error) {
    return { parts, error };
  }
}

const deltasOf = (parts: readonly LanguageModelV4StreamPart[]): string[] => parts.flatMap((p) => (p.type === 'text-delta' ? [p.delta] : []));

describe('wordDeltas', () => {
  it('splits text into words, each with the whitespace before it, and loses no character', () => {
    expect(wordDeltas('Hello big  world\n')).toEqual(['Hello', ' big', '  world', '\n']);
    expect(wordDeltas(' lead')).toEqual([' lead']);
    expect(wordDeltas('')).toEqual([]);
  });
});

describe('scriptedModel', () => {
  it('streams a step as the provider parts a V4 model sends: text deltas by word, then finish', async () => {
    const model = scriptedModel([{ text: 'Hello big world', usage: { inputTokens: 7 } }]);
    expect(model).toMatchObject({ specificationVersion: 'v4', provider: 'scripted', modelId: 'scripted-model' });
    const { parts, error } = await read(model);
    expect(error).toBeUndefined();
    expect(parts).toEqual([
      { type: 'stream-start', warnings: [] },
      { type: 'text-start', id: 'text_1' },
      { type: 'text-delta', id: 'text_1', delta: 'Hello' },
      { type: 'text-delta', id: 'text_1', delta: ' big' },
      { type: 'text-delta', id: 'text_1', delta: ' world' },
      { type: 'text-end', id: 'text_1' },
      {
        type: 'finish',
        finishReason: { unified: 'stop', raw: 'stop' },
        usage: {
          inputTokens: { total: 7, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
          outputTokens: { total: 3, text: undefined, reasoning: undefined },
        },
      },
    ]);
  });

  it('streams explicit deltas as given', async () => {
    const { parts } = await read(scriptedModel([{ text: ['Hel', 'lo', ' ', 'world'] }]));
    expect(deltasOf(parts)).toEqual(['Hel', 'lo', ' ', 'world']);
  });

  it('streams tool calls after the text, with deterministic ids and JSON input, and finishes with tool-calls', async () => {
    const model = scriptedModel([
      { text: 'Checking.' },
      {
        text: 'Let me look.',
        toolCalls: [
          { toolName: 'weather', input: { city: 'Oslo' } },
          { toolName: 'weather', input: { city: 'Rome' }, toolCallId: 'mine' },
        ],
      },
    ]);
    await read(model);
    const { parts } = await read(model);
    expect(parts.filter((p) => p.type.startsWith('tool-') || p.type === 'finish').map((p) => ('finishReason' in p ? p.finishReason : p))).toEqual([
      { type: 'tool-input-start', id: 'call_2_0', toolName: 'weather' },
      { type: 'tool-input-delta', id: 'call_2_0', delta: '{"city":"Oslo"}' },
      { type: 'tool-input-end', id: 'call_2_0' },
      { type: 'tool-call', toolCallId: 'call_2_0', toolName: 'weather', input: '{"city":"Oslo"}' },
      { type: 'tool-input-start', id: 'mine', toolName: 'weather' },
      { type: 'tool-input-delta', id: 'mine', delta: '{"city":"Rome"}' },
      { type: 'tool-input-end', id: 'mine' },
      { type: 'tool-call', toolCallId: 'mine', toolName: 'weather', input: '{"city":"Rome"}' },
      { unified: 'tool-calls', raw: 'tool-calls' },
    ]);
    // Text first: the last delta comes before the first tool part.
    expect(parts.findIndex((p) => p.type === 'text-end')).toBeLessThan(parts.findIndex((p) => p.type === 'tool-input-start'));
  });

  it('honours an explicit finish reason', async () => {
    const { parts } = await read(scriptedModel([{ text: 'cut', finishReason: 'length' }]));
    expect(parts.at(-1)).toMatchObject({ type: 'finish', finishReason: { unified: 'length' } });
  });

  it('refuses a call before any output when the step has an error (a string becomes an Error)', async () => {
    const model = scriptedModel([{ error: 'HTTP 500: overloaded' }]);
    await expect(model.doStream(call())).rejects.toThrow(new Error('HTTP 500: overloaded'));
    const own = new TypeError('exactly this one');
    await expect(scriptedModel([{ error: own }]).doStream(call())).rejects.toBe(own);
  });

  it('fails mid-stream with an error part after `afterDeltas` deltas', async () => {
    const boom = new Error('connection reset');
    const { parts, error } = await read(scriptedModel([{ text: 'one two three four', error: boom, afterDeltas: 2 }]));
    expect(error).toBeUndefined();
    expect(deltasOf(parts)).toEqual(['one', ' two']);
    expect(parts.at(-1)).toEqual({ type: 'error', error: boom });
    expect(parts.some((p) => p.type === 'finish')).toBe(false);
  });

  it('stops emitting and errors with an AbortError once the call is aborted mid-stream', async () => {
    const controller = new AbortController();
    const model = scriptedModel([{ text: Array.from({ length: 10_000 }, (_, i) => `w${i} `) }]);
    const { stream } = await model.doStream(call(controller.signal));
    const reader = stream.getReader();
    const seen: LanguageModelV4StreamPart[] = [];
    seen.push((await reader.read()).value!, (await reader.read()).value!);
    controller.abort();
    await expect(reader.read()).rejects.toMatchObject({ name: 'AbortError' });
    expect(seen.map((p) => p.type)).toEqual(['stream-start', 'text-start']);
  });

  it('a hanging step produces nothing until aborted, then errors with an AbortError', async () => {
    const controller = new AbortController();
    const model = scriptedModel([{ text: 'a b c', hang: true, afterDeltas: 1 }]);
    const { stream } = await model.doStream(call(controller.signal));
    const reader = stream.getReader();
    const parts: LanguageModelV4StreamPart[] = [];
    for (let i = 0; i < 3; i++) parts.push((await reader.read()).value!);
    expect(deltasOf(parts)).toEqual(['a']);
    const next = reader.read();
    controller.abort();
    await expect(next).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('refuses a call whose signal is aborted already', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(scriptedModel([{ text: 'never' }]).doStream(call(controller.signal))).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('records every call it received, with its prompt and tools', async () => {
    const model = scriptedModel([{ text: 'one' }, { text: 'two' }]);
    const tools = [{ type: 'function' as const, name: 'weather', inputSchema: { type: 'object' as const } }];
    await read(model, { ...call(), tools });
    await read(model, { prompt: [{ role: 'system', content: 'Be brief.' }] });
    expect(model.doStreamCalls.map((c) => c.prompt)).toEqual([[{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }], [{ role: 'system', content: 'Be brief.' }]]);
    expect(model.doStreamCalls[0]?.tools).toEqual(tools);
  });

  it('keeps only the latest keepCalls calls: a model that answers for long holds no prompt of old calls', async () => {
    const model = scriptedModel([{ text: 'a' }], { whenExhausted: 'cycle', keepCalls: 2 });
    for (const text of ['one', 'two', 'three']) await read(model, { prompt: [{ role: 'system', content: text }] });
    expect(model.doStreamCalls.map((c) => c.prompt[0]?.content)).toEqual(['two', 'three']);
    const none = scriptedModel([{ text: 'a' }], { whenExhausted: 'cycle', keepCalls: 0 });
    expect(deltasOf((await read(none)).parts)).toEqual(['a']);
    expect(none.doStreamCalls).toEqual([]);
  });

  it('refuses a call past the end of its script, naming the call and the script length', async () => {
    const model = scriptedModel([{ text: 'only' }], { modelId: 'm1' });
    await read(model);
    const refused = model.doStream(call());
    await expect(refused).rejects.toBeInstanceOf(ScriptExhaustedError);
    await expect(refused).rejects.toThrowErrorMatchingInlineSnapshot(
      `[ScriptExhaustedError: scriptedModel "m1": call 2 has no step, the script has 1; add steps, or pass { whenExhausted: 'cycle' } to start it over]`,
    );
  });

  it('starts over with whenExhausted: cycle', async () => {
    const model = scriptedModel([{ text: 'a' }, { text: 'b' }], { whenExhausted: 'cycle' });
    const answers: string[][] = [];
    for (let i = 0; i < 3; i++) answers.push(deltasOf((await read(model)).parts));
    expect(answers).toEqual([['a'], ['b'], ['a']]);
  });

  it('makes a step from the call when the entry is a function', async () => {
    const model = scriptedModel([(options, n) => ({ text: `call ${n}: ${JSON.stringify(options.prompt.at(-1)?.content)}` })]);
    expect(deltasOf((await read(model)).parts).join('')).toBe('call 1: [{"type":"text","text":"Hi"}]');
  });

  it('refuses options that make no sense, naming them', () => {
    expect(() => scriptedModel([], { whenExhausted: 'cycle' })).toThrow('a cycling script needs at least one step');
    expect(() => scriptedModel([], { whenExhausted: 'loop' as 'cycle' })).toThrow(`"whenExhausted" must be 'error' or 'cycle', got loop`);
    expect(() => scriptedModel([{ text: 'a' }], { keepCalls: -1 })).toThrow('"keepCalls" must be a non-negative integer, got -1');
    expect(() => scriptedModel([{ text: 'a' }], { keepCalls: 1.5 })).toThrow('"keepCalls" must be a non-negative integer, got 1.5');
  });

  it('streams 100,000 deltas, produced as they are read', async () => {
    const deltas = Array.from({ length: 100_000 }, (_, i) => `${i} `);
    const { parts } = await read(scriptedModel([{ text: deltas }]));
    expect(parts.length).toBe(100_000 + 4);
    expect(deltasOf(parts).join('')).toBe(deltas.join(''));
  });

  it('works with the AI SDK: streamText gets its text and tool calls, generateText too', async () => {
    const model = scriptedModel([{ text: 'Hello there', toolCalls: [{ toolName: 'weather', input: { city: 'Oslo' } }] }], { whenExhausted: 'cycle' });
    const result = streamText({ model, prompt: 'Hi', maxRetries: 0 });
    expect(await result.text).toBe('Hello there');
    expect((await result.toolCalls).map((c) => [c.toolCallId, c.toolName, c.input])).toEqual([['call_1_0', 'weather', { city: 'Oslo' }]]);
    const generated = await generateText({ model, prompt: 'Hi', maxRetries: 0 });
    expect(generated.text).toBe('Hello there');
    expect(generated.finishReason).toBe('tool-calls');
    expect(model.doGenerateCalls).toHaveLength(1);
  });
});
