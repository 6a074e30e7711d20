import type { LanguageModelV4, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { NoOutputGeneratedError, StreamProviderError, dynamicTool, jsonSchema, streamText, type ModelMessage, type TextStreamPart, type ToolSet } from 'ai';
import { MockLanguageModelV3, MockLanguageModelV4 } from 'ai/test';
import { afterEach, describe, expect, it } from 'vitest';
import { ModelCallTimeoutError, modelCall$, scriptedModel, type ModelPart, type ModelRequest } from '../../../src/agents.js';
import { ManualClock, collect, defined, request, settle } from './support.js';

/*
 * modelCall$ reads the provider's stream itself (`doStream`), and must answer as the AI SDK's
 * `streamText` did: each case here runs both on the same provider parts and compares.
 */

const usage = (input?: number, output?: number) => ({
  inputTokens: { total: input, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: output, text: undefined, reasoning: undefined },
});
const FINISH: LanguageModelV4StreamPart = { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage: usage(3, 4) };

/** A model whose every call streams `parts`, then ends. */
const streaming = (parts: readonly LanguageModelV4StreamPart[]): MockLanguageModelV4 =>
  new MockLanguageModelV4({
    doStream: async () => ({
      stream: new ReadableStream({
        start(controller) {
          for (const part of parts) controller.enqueue(part);
          controller.close();
        },
      }),
    }),
  });

/** The request's tools as `streamText` was given them (JSON Schema, no `execute`). */
const sdkTools = (tools: ModelRequest['tools']): ToolSet =>
  Object.fromEntries(Object.entries(tools).map(([name, spec]) => [name, dynamicTool({ description: spec.description, inputSchema: jsonSchema(spec.inputSchema) })]));

/** Every `fullStream` part `streamText` gives for the model and request (`maxRetries: 0`, as modelCall$ had it). */
async function viaStreamText(model: LanguageModelV4, req: ModelRequest = request): Promise<TextStreamPart<ToolSet>[]> {
  const result = streamText({ model, system: req.system, messages: [...req.messages], tools: sdkTools(req.tools), maxRetries: 0, onError: () => {} });
  const parts: TextStreamPart<ToolSet>[] = [];
  for await (const part of result.fullStream) parts.push(part);
  return parts;
}

describe('modelCall$ at the provider level, against streamText on the same provider parts', () => {
  // A known tool and an unknown one; input that parses, that does not, that is empty, that is not
  // an object, and that would set a prototype (which the SDK's parser refuses).
  it.each([
    ['weather', '{"city":"Oslo"}'],
    ['weather', '{"city":'],
    ['weather', ''],
    ['weather', '  '],
    ['weather', '{"town":1}'],
    ['weather', '[1,2]'],
    ['weather', '"Oslo"'],
    ['weather', '{"__proto__":{"admin":true}}'],
    ['weather', '{"constructor":{"prototype":{"admin":true}}}'],
    ['teleport', '{"to":"Mars"}'],
    ['teleport', 'to Mars'],
    ['teleport', ''],
    ['toString', '{}'],
  ])('passes on a call of %j with input %j as streamText did', async (toolName, input) => {
    const parts: LanguageModelV4StreamPart[] = [{ type: 'tool-call', toolCallId: 'c1', toolName, input }, FINISH];
    const sdk = (await viaStreamText(streaming(parts))).find((part) => part.type === 'tool-call');
    const { values, error } = await collect(modelCall$(streaming(parts), request));
    expect(error).toBeUndefined();
    expect(values[0]).toEqual({ type: 'tool-call', toolCallId: 'c1', toolName, input: defined(sdk).input });
  });

  it.each([
    ['an OpenAI-style payload', { message: 'boom', type: 'server_error', code: 'internal', param: null }],
    ['a payload under error', { error: { message: 'Overloaded', type: 'overloaded_error' } }],
    ['a payload under response.error', { response: { error: { message: 'slow down', status: 429 } } }],
    ['a payload with a status code as text', { message: 'gone', status_code: '503', is_retryable: false }],
    ['a payload whose message names a status', { message: 'Overloaded' }],
    ['a payload whose message is an object key', { message: 'constructor' }],
  ])('turns %s in an error part into the StreamProviderError streamText made', async (_, payload) => {
    const parts: LanguageModelV4StreamPart[] = [
      { type: 'stream-start', warnings: [] },
      { type: 'error', error: payload },
    ];
    const sdk = defined((await viaStreamText(streaming(parts))).find((part) => part.type === 'error'));
    const { error } = await collect(modelCall$(streaming(parts), request));
    expect(StreamProviderError.isInstance(sdk.error)).toBe(true);
    expect(StreamProviderError.isInstance(error)).toBe(true);
    const fields = (e: unknown) => {
      const { message, type, code, statusCode, isRetryable, data } = e as StreamProviderError;
      return { message, type, code, statusCode, isRetryable, data };
    };
    expect(fields(error)).toEqual(fields(sdk.error));
  });

  it.each([
    ['an Error', new RangeError('bad chunk')],
    ['a string', 'just a string'],
    ['a payload with no message', { code: 42 }],
  ])('passes %s in an error part on as it came, as streamText did', async (_, payload) => {
    const parts: LanguageModelV4StreamPart[] = [{ type: 'error', error: payload }];
    const sdk = defined((await viaStreamText(streaming(parts))).find((part) => part.type === 'error'));
    const { error } = await collect(modelCall$(streaming(parts), request));
    expect(sdk.error).toBe(payload);
    expect(error).toBe(payload);
  });

  it('finishes "other" with no usage when the stream ends without a finish, as streamText did', async () => {
    const parts: LanguageModelV4StreamPart[] = [
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'Hi' },
    ];
    const sdk = defined((await viaStreamText(streaming(parts))).find((part) => part.type === 'finish'));
    const { values, error } = await collect(modelCall$(streaming(parts), request));
    expect(error).toBeUndefined();
    expect(sdk.finishReason).toBe('other');
    expect(values).toEqual([
      { type: 'text-delta', text: 'Hi' },
      { type: 'finish', finishReason: 'other', usage: {}, model: 'mock-model-id', provider: 'mock-provider' },
    ]);
  });

  it('errors with NoOutputGeneratedError when the stream ends with no part at all, as streamText did', async () => {
    const sdk = defined((await viaStreamText(streaming([]))).find((part) => part.type === 'error'));
    const { values, error } = await collect(modelCall$(streaming([]), request));
    expect(NoOutputGeneratedError.isInstance(sdk.error)).toBe(true);
    expect(values).toEqual([]);
    expect(NoOutputGeneratedError.isInstance(error)).toBe(true);
  });

  it('reports the usage streamText reported: cache reads and reasoning too, the total the sum', async () => {
    const parts: LanguageModelV4StreamPart[] = [
      {
        type: 'finish',
        finishReason: { unified: 'stop', raw: 'stop' },
        usage: { inputTokens: { total: 120, noCache: 20, cacheRead: 100, cacheWrite: 0 }, outputTokens: { total: 40, text: 10, reasoning: 30 } },
      },
    ];
    const sdk = defined((await viaStreamText(streaming(parts))).find((part) => part.type === 'finish'));
    const { values } = await collect(modelCall$(streaming(parts), request));
    expect(values).toEqual([
      {
        type: 'finish',
        finishReason: 'stop',
        usage: { inputTokens: 120, outputTokens: 40, totalTokens: 160, cacheReadTokens: 100, reasoningTokens: 30 },
        model: 'mock-model-id',
        provider: 'mock-provider',
      },
    ]);
    const { totalUsage } = sdk;
    expect([totalUsage.inputTokens, totalUsage.outputTokens, totalUsage.totalTokens]).toEqual([120, 40, 160]);
    expect([totalUsage.inputTokenDetails.cacheReadTokens, totalUsage.outputTokenDetails.reasoningTokens]).toEqual([100, 30]);
  });

  it('gives the model the prompt, tools and tool choice streamText gave it, for a transcript with tool calls and every kind of result', async () => {
    const messages: ModelMessage[] = [
      { role: 'user', content: 'Weather in Oslo and Bergen? And delete /tmp.' },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Checking.' },
          { type: 'tool-call', toolCallId: 'c1', toolName: 'weather', input: { city: 'Oslo' } },
          { type: 'tool-call', toolCallId: 'c2', toolName: 'weather', input: { city: 'Bergen' } },
          { type: 'tool-call', toolCallId: 'c3', toolName: 'shell', input: { command: 'rm -rf /tmp' } },
        ],
      },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: 'c1', toolName: 'weather', output: { type: 'json', value: { celsius: 4 } } },
          { type: 'tool-result', toolCallId: 'c2', toolName: 'weather', output: { type: 'error-text', value: 'the tool timed out' } },
          { type: 'tool-result', toolCallId: 'c3', toolName: 'shell', output: { type: 'execution-denied', reason: 'not allowed' } },
        ],
      },
      // ReAct's shape: one assistant tool call and its tool message at a time, a text result.
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'r1', toolName: 'weather', input: 'Oslo' }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'r1', toolName: 'weather', output: { type: 'text', value: '4 °C' } }] },
      { role: 'assistant', content: 'It is 4 °C in Oslo.' },
      { role: 'user', content: [{ type: 'text', text: 'Thanks' }] },
    ];
    const req: ModelRequest = { ...request, messages };
    const viaSdk = scriptedModel([{ text: 'ok' }]);
    await viaStreamText(viaSdk, req);
    const direct = scriptedModel([{ text: 'ok' }]);
    await collect(modelCall$(direct, req));
    const { prompt, tools, toolChoice } = defined(direct.doStreamCalls[0]);
    const sdkCall = defined(viaSdk.doStreamCalls[0]);
    expect(prompt).toEqual(sdkCall.prompt);
    expect(tools).toEqual(sdkCall.tools);
    expect(toolChoice).toEqual({ type: 'auto' });
    expect(sdkCall.toolChoice).toEqual({ type: 'auto' });
  });

  it('refuses a request with no messages before calling the model, as streamText did', async () => {
    const model = scriptedModel([{ text: 'ok' }]);
    const { error } = await collect(modelCall$(model, { ...request, messages: [] }));
    expect(error).toMatchObject({ name: 'AI_InvalidPromptError', message: expect.stringContaining('messages must not be empty') });
    expect(model.doStreamCalls).toEqual([]);
  });
});

describe('modelCall$ reading the provider’s stream', () => {
  afterEach(() => {
    globalThis.AI_SDK_DEFAULT_PROVIDER = undefined;
  });

  it('counts tool input deltas as activity: a long tool call streaming its input does not time out', async () => {
    const clock = new ManualClock();
    let push!: (part: LanguageModelV4StreamPart) => void;
    let end!: () => void;
    const model = new MockLanguageModelV4({
      doStream: async () => ({
        stream: new ReadableStream<LanguageModelV4StreamPart>({
          start(controller) {
            push = (part) => controller.enqueue(part);
            end = () => controller.close();
          },
        }),
      }),
    });
    const parts: ModelPart[] = [];
    let failure: unknown;
    let completed = false;
    modelCall$(model, request, { timeoutMs: 10_000, scheduler: clock }).subscribe({
      next: (p) => parts.push(p),
      error: (e: unknown) => (failure = e),
      complete: () => (completed = true),
    });
    for (let i = 0; i < 10; i++) await settle();
    expect(push).toBeDefined();
    push({ type: 'tool-input-start', id: 'c1', toolName: 'weather' });
    // Thirty seconds of input, a piece every 6 s: no 10 s without a part.
    for (const [at, delta] of [
      [6_000, '{"ci'],
      [12_000, 'ty":'],
      [18_000, '"Os'],
      [24_000, 'lo"}'],
    ] as const) {
      clock.advanceTo(at);
      push({ type: 'tool-input-delta', id: 'c1', delta });
      await settle();
    }
    clock.advanceTo(30_000);
    expect(failure).toBeUndefined();
    push({ type: 'tool-input-end', id: 'c1' });
    push({ type: 'tool-call', toolCallId: 'c1', toolName: 'weather', input: '{"city":"Oslo"}' });
    push(FINISH);
    end();
    for (let i = 0; i < 10 && !completed; i++) await settle();
    expect(failure).toBeUndefined();
    expect(parts.map((p) => p.type)).toEqual(['tool-call', 'finish']);
  });

  it('times out 10 s after the last tool input delta when the input stops coming', async () => {
    const clock = new ManualClock();
    let push!: (part: LanguageModelV4StreamPart) => void;
    const model = new MockLanguageModelV4({
      doStream: async () => ({ stream: new ReadableStream<LanguageModelV4StreamPart>({ start: (controller) => void (push = (part) => controller.enqueue(part)) }) }),
    });
    let failure: unknown;
    modelCall$(model, request, { timeoutMs: 10_000, scheduler: clock }).subscribe({ error: (e: unknown) => (failure = e) });
    for (let i = 0; i < 10; i++) await settle();
    clock.advanceTo(6_000);
    push({ type: 'tool-input-start', id: 'c1', toolName: 'weather' });
    await settle();
    clock.advanceTo(15_999);
    expect(failure).toBeUndefined();
    clock.advanceTo(16_000);
    expect(failure).toEqual(new ModelCallTimeoutError('mock-provider/mock-model-id', 10_000));
  });

  it('resolves a model id string through the AI SDK’s global provider, naming it as the string', async () => {
    const resolved: string[] = [];
    const model = scriptedModel([{ text: 'Hi' }], { provider: 'acme.chat', modelId: 'acme-1' });
    globalThis.AI_SDK_DEFAULT_PROVIDER = {
      specificationVersion: 'v4',
      languageModel: (id: string) => (resolved.push(id), model),
      embeddingModel: () => {
        throw new Error('no embeddings');
      },
      imageModel: () => {
        throw new Error('no images');
      },
    };
    const { values, error } = await collect(modelCall$('acme/acme-1', request));
    expect(error).toBeUndefined();
    expect(resolved).toEqual(['acme/acme-1']);
    expect(values).toEqual([
      { type: 'text-delta', text: 'Hi' },
      { type: 'finish', finishReason: 'stop', usage: { outputTokens: 1, totalTokens: 1 }, model: 'acme/acme-1', provider: 'acme' },
    ]);
  });

  it('reads a V3 model through the AI SDK’s adapter', async () => {
    const model = new MockLanguageModelV3({
      doStream: async () => ({
        stream: new ReadableStream({
          start(controller) {
            controller.enqueue({ type: 'text-delta', id: 't', delta: 'Hi' });
            controller.enqueue({ type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: usage(1, 1) });
            controller.close();
          },
        }),
      }),
    });
    const { values, error } = await collect(modelCall$(model, request));
    expect(error).toBeUndefined();
    expect(values).toEqual([
      { type: 'text-delta', text: 'Hi' },
      { type: 'finish', finishReason: 'stop', usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }, model: 'mock-model-id', provider: 'mock-provider' },
    ]);
  });

  it('cancels the provider’s stream when unsubscribed, for a provider that does not watch the abort signal', async () => {
    let cancelled: unknown = 'not cancelled';
    const model = new MockLanguageModelV4({
      doStream: async () => ({
        stream: new ReadableStream<LanguageModelV4StreamPart>({
          start(controller) {
            controller.enqueue({ type: 'text-delta', id: 't', delta: 'Once' });
          },
          cancel(reason) {
            cancelled = reason;
          },
        }),
      }),
    });
    const first = new Promise<void>((resolve) => {
      const subscription = modelCall$(model, request).subscribe(() => {
        subscription.unsubscribe();
        resolve();
      });
    });
    await first;
    await settle();
    expect(cancelled).toBeUndefined();
  });
});
