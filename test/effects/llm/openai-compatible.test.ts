import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { APICallError } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine } from '../../../src/index.js';
import { AllProvidersFailedError, modelCall$, type ModelPart } from '../../../src/agents.js';
import { ManualClock, answering, breaker, collect, request, runChain } from './support.js';

/** One request the server received, and how it ended. */
interface Exchange {
  readonly body: Record<string, unknown>;
  /** Resolves when the response's connection closed; `finished`: whether the server had ended the response by then. */
  readonly closed: Promise<{ finished: boolean }>;
}

/** The chat-completions streaming format: one SSE `data:` line per chunk, then `[DONE]`. */
const sse = (res: ServerResponse, chunks: readonly unknown[], done = true): void => {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const chunk of chunks) res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  if (done) res.end('data: [DONE]\n\n');
};

/** What the server answers, chosen by the request's `model`. */
const answers: Record<string, (res: ServerResponse) => void> = {
  hello: (res) =>
    sse(res, [
      { choices: [{ delta: { role: 'assistant', content: 'Hel' } }] },
      { choices: [{ delta: { content: 'lo!' } }] },
      { choices: [{ delta: {}, finish_reason: 'stop' }] },
      { choices: [], usage: { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 } },
    ]),
  tools: (res) =>
    sse(res, [
      { choices: [{ delta: { role: 'assistant', tool_calls: [{ index: 0, id: 'call_abc', type: 'function', function: { name: 'weather', arguments: '' } }] } }] },
      { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] } }] },
      { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] } }] },
      { choices: [{ delta: {}, finish_reason: 'tool_calls' }] },
    ]),
  broken: (res) => {
    res.writeHead(500, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'the model server crashed', type: 'server_error' } }));
  },
  // One delta, then the response stays open: a long answer the client walks away from.
  endless: (res) => sse(res, [{ choices: [{ delta: { content: 'Once upon a time' } }] }], false),
};

let baseURL = '';
const exchanges: Exchange[] = [];
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  let raw = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => (raw += chunk));
  req.on('end', () => {
    const closed = new Promise<{ finished: boolean }>((resolve) => res.on('close', () => resolve({ finished: res.writableFinished })));
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404).end();
      return;
    }
    const body = JSON.parse(raw) as Record<string, unknown>;
    exchanges.push({ body, closed });
    (answers[String(body.model)] ?? answers.broken!)(res);
  });
});

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const local = () => createOpenAICompatible({ name: 'local', baseURL, includeUsage: true });

describe('modelCall$ with an OpenAI-compatible server (chat completions over SSE on 127.0.0.1)', () => {
  it('streams the text deltas and the finish with its usage, and sent the request in the chat-completions format', async () => {
    const { values, error } = await collect(modelCall$(local()('hello'), request));
    expect(error).toBeUndefined();
    expect(values).toEqual<ModelPart[]>([
      { type: 'text-delta', text: 'Hel' },
      { type: 'text-delta', text: 'lo!' },
      // The provider reports cache and reasoning counts as 0 when the server sends none.
      {
        type: 'finish',
        finishReason: 'stop',
        usage: { inputTokens: 11, outputTokens: 2, totalTokens: 13, cacheReadTokens: 0, reasoningTokens: 0 },
        model: 'hello',
        provider: 'local.chat',
      },
    ]);
    expect(exchanges.at(-1)?.body).toMatchObject({
      model: 'hello',
      stream: true,
      stream_options: { include_usage: true },
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Weather in Oslo?' },
      ],
      tools: [{ type: 'function', function: { name: 'weather', description: 'The weather in a city', parameters: request.tools.weather!.inputSchema } }],
    });
  });

  it('streams a tool call assembled from its argument deltas, and finishes with tool-calls', async () => {
    const { values, error } = await collect(modelCall$(local()('tools'), request));
    expect(error).toBeUndefined();
    expect(values).toEqual([
      { type: 'tool-call', toolCallId: 'call_abc', toolName: 'weather', input: { city: 'Oslo' } },
      { type: 'finish', finishReason: 'tool-calls', usage: {}, model: 'tools', provider: 'local.chat' },
    ]);
  });

  it('errors with the provider’s APICallError when the server answers HTTP 500', async () => {
    const { values, error } = await collect(modelCall$(local()('broken'), request));
    expect(values).toEqual([]);
    expect(APICallError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ statusCode: 500, message: 'the model server crashed' });
  });

  // Without the abort the close never comes, and the test fails at its (generous) bound.
  it('closes the HTTP request when unsubscribed mid-stream', { timeout: 5000 }, async () => {
    const before = exchanges.length;
    const firstDelta = new Promise<void>((resolve) => {
      const subscription = modelCall$(local()('endless'), request).subscribe((part) => {
        expect(part).toEqual({ type: 'text-delta', text: 'Once upon a time' });
        subscription.unsubscribe();
        resolve();
      });
    });
    await firstDelta;
    const exchange = exchanges[before]!;
    // The server never ended this response: only the client's abort can close it.
    expect(await exchange.closed).toEqual({ finished: false });
  });

  it('a chain falls back from the server’s HTTP 500 to the next provider and records it on the breaker', async () => {
    const clock = new ManualClock();
    const engine = createEngine({ scheduler: clock });
    const chain = {
      providers: [
        { name: 'local', model: local()('broken') },
        { name: 'spare', model: answering('spare', 'Spare answer') },
      ],
    };
    const run = await runChain(engine, chain, clock);
    expect(run.parts[0]).toEqual({ type: 'text-delta', text: 'Spare' });
    expect(await breaker(engine, 'local')).toMatchObject({
      failureCount: 1,
      lastError: 'HTTP 500: the model server crashed (server said: {"error":{"message":"the model server crashed","type":"server_error"}})',
    });

    const alone = await runChain(engine, { providers: [chain.providers[0]!] }, clock);
    expect(alone.error).toBeInstanceOf(AllProvidersFailedError);
    expect((alone.error as Error).message).toBe(
      'all providers failed: "local": HTTP 500: the model server crashed (server said: {"error":{"message":"the model server crashed","type":"server_error"}})',
    );
    await engine.close();
  });
});
