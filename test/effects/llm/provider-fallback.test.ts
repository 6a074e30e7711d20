import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { filter, firstValueFrom } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine } from '../../../src/index.js';
import {
  AllProvidersFailedError,
  EmptyAnswerError,
  MAX_ERROR_BODY_LENGTH,
  ProviderFailedError,
  chainCall$,
  providerBreakerStream,
  providerBreakers,
  scriptedModel,
  type Provider,
  type ProviderChain,
} from '../../../src/agents.js';
import { ManualClock, breaker, defined, request, runChain, settle } from './support.js';

/** The virtual clock's start: an HTTP-date `Retry-After` is read against it. */
const START = Date.parse('2026-11-24T10:00:00Z');

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
};
const sse = (res: ServerResponse, chunks: readonly string[]): void => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const chunk of chunks) res.write(`data: ${chunk}\n\n`);
  res.end('data: [DONE]\n\n');
};

/** What the chat-completions server on 127.0.0.1 answers, by the request's `model`. */
const answers: Record<string, (res: ServerResponse) => void> = {
  hello: (res) => sse(res, [JSON.stringify({ choices: [{ delta: { content: 'Hello' } }] }), JSON.stringify({ choices: [{ delta: {}, finish_reason: 'stop' }] })]),
  limited: (res) => json(res, 429, { error: { message: 'Rate limit reached', type: 'rate_limit' } }, { 'retry-after': '7' }),
  unavailable: (res) => json(res, 503, { error: { message: 'overloaded' } }, { 'retry-after': new Date(START + 30_000).toUTCString() }),
  crashed: (res) => json(res, 500, { error: { message: 'the model server crashed', type: 'server_error', trace: 'x'.repeat(10_000) } }),
  empty: (res) => sse(res, [JSON.stringify({ choices: [{ delta: {}, finish_reason: 'stop' }] })]),
  garbage: (res) => sse(res, ['{"choices": [{"delta": {"content": ']),
};

let baseURL = '';
const server = createServer((req, res) => {
  let raw = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => (raw += chunk));
  req.on('end', () => answers[String((JSON.parse(raw) as { model: unknown }).model)]!(res));
});
beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** A chain of the server's models, by name, each provider named after its model. */
const chainOf = (models: readonly string[], breaker: Provider['breaker'] = {}): ProviderChain => {
  const provider = createOpenAICompatible({ name: 'local', baseURL, includeUsage: true });
  return { providers: models.map((name) => ({ name, model: provider(name), breaker })) };
};

describe('provider fallback against an OpenAI-compatible server on 127.0.0.1', () => {
  it('an HTTP 429 with Retry-After opens the breaker at once, for the Retry-After (virtual time), and the chain falls over', async () => {
    const clock = new ManualClock(START);
    const engine = createEngine({ scheduler: clock, epics: [providerBreakers()] });
    const chain = chainOf(['limited', 'hello'], { failureThreshold: 3, openTimeoutMs: 60_000 });

    const run = await runChain(engine, chain, clock);
    expect(run.parts[0]).toEqual({ type: 'text-delta', text: 'Hello' });
    expect(run.commands.slice(0, 2)).toEqual(['spawn provider/limited', 'provider/limited failure']);
    const opened = defined(await breaker(engine, 'limited'));
    expect(opened).toMatchObject({ value: 'OPEN', failureCount: 1, openForMs: 7000 });
    expect(opened.lastError).toBe('HTTP 429: Rate limit reached (server said: {"error":{"message":"Rate limit reached","type":"rate_limit"}})');

    const halfOpen = firstValueFrom(engine.runes$().pipe(filter((r) => r.stream === 'provider/limited' && r.to === 'HALF_OPEN')));
    clock.advanceTo(START + 6999);
    await settle();
    expect((await breaker(engine, 'limited'))?.value).toBe('OPEN');
    clock.advanceTo(START + 7000); // the Retry-After, not the 60 s openTimeoutMs
    expect(await halfOpen).toMatchObject({ at: START + 7000 });
    expect((await breaker(engine, 'limited'))?.openForMs).toBeUndefined();
    await engine.close();
  });

  it('an HTTP 503 with an HTTP-date Retry-After opens the breaker until that date; every failure names its provider and keeps the body', async () => {
    const clock = new ManualClock(START);
    const engine = createEngine({ scheduler: clock });
    const run = await runChain(engine, chainOf(['unavailable', 'crashed']), clock);
    const error = run.error as AllProvidersFailedError;
    expect(error).toBeInstanceOf(AllProvidersFailedError);
    const [unavailable, crashed] = error.failures.map((f) => f.error);
    expect(unavailable).toBeInstanceOf(ProviderFailedError);
    expect(unavailable).toMatchObject({ provider: 'unavailable', statusCode: 503, retryAfterMs: 30_000, responseBody: '{"error":{"message":"overloaded"}}' });
    expect(unavailable!.message).toBe('provider "unavailable" failed: HTTP 503: overloaded (server said: {"error":{"message":"overloaded"}})');
    expect(crashed).toMatchObject({ provider: 'crashed', statusCode: 500, retryAfterMs: undefined });
    expect(crashed!.responseBody).toHaveLength(MAX_ERROR_BODY_LENGTH);
    expect(crashed!.responseBody!.startsWith('{"error":{"message":"the model server crashed"')).toBe(true);
    expect(await breaker(engine, 'unavailable')).toMatchObject({ value: 'OPEN', openForMs: 30_000 });
    // A 500 counts as one failure of three: still CLOSED.
    expect(await breaker(engine, 'crashed')).toMatchObject({ value: 'CLOSED', failureCount: 1 });
    await engine.close();
  });

  it('an empty answer (no text, no tool call) and an unparseable stream are failures, and fall over', async () => {
    const clock = new ManualClock(START);
    const engine = createEngine({ scheduler: clock });
    const run = await runChain(engine, chainOf(['empty', 'garbage', 'hello']), clock);
    expect(run.error).toBeUndefined();
    expect(run.parts.map((p) => p.type)).toEqual(['text-delta', 'finish']);
    // The empty answer was answered (and billed): one spent call; the unparseable stream was not answered.
    expect(run.spent).toHaveLength(1);
    expect(run.spent[0]).toMatchObject({ type: 'spent', model: expect.any(String) });
    expect(run.commands.filter((c) => c.endsWith('failure'))).toEqual(['provider/empty failure', 'provider/garbage failure']);
    expect((await breaker(engine, 'empty'))?.lastError).toBe('the model answered nothing: no text and no tool call (finish reason "stop")');

    const alone = await runChain(engine, chainOf(['empty']), clock);
    expect((alone.error as AllProvidersFailedError).failures[0]?.error.cause).toBeInstanceOf(EmptyAnswerError);
    expect(alone.parts).toEqual([]); // the held finish part is not emitted
    expect(alone.spent).toHaveLength(1);
    await engine.close();
  });
});

describe('HALF_OPEN trial calls', () => {
  /** A chain whose first provider's breaker is HALF_OPEN, its calls hanging until unsubscribed. */
  async function halfOpenChain(halfOpenMaxCalls: number | undefined) {
    const clock = new ManualClock(START);
    const engine = createEngine({ scheduler: clock });
    const trial = scriptedModel([{ hang: true }], { modelId: 'trial', whenExhausted: 'cycle' });
    const chain: ProviderChain = {
      providers: [
        { name: 'trial', model: trial, breaker: { failureThreshold: 1, openTimeoutMs: 1000, ...(halfOpenMaxCalls === undefined ? {} : { halfOpenMaxCalls }) } },
        { name: 'spare', model: scriptedModel([{ text: 'spare' }], { modelId: 'spare', whenExhausted: 'cycle' }) },
      ],
    };
    await engine.spawn(providerBreakerStream('trial'), 'circuit-breaker', {
      failureThreshold: 1,
      successThreshold: 1,
      openTimeoutMs: 1000,
      ...(halfOpenMaxCalls === undefined ? {} : { halfOpenMaxCalls }),
    });
    await engine.dispatch(providerBreakerStream('trial'), { type: 'failure' });
    await engine.dispatch(providerBreakerStream('trial'), { type: 'open_timeout_elapsed' });
    return { clock, engine, trial, chain };
  }

  it('lets one trial call through by default; a concurrent call skips the provider until the trial ends', async () => {
    const { clock, engine, trial, chain } = await halfOpenChain(undefined);
    const first = chainCall$(chain, request, { snapshot: engine.snapshot, scheduler: clock }).subscribe();
    await settle();
    expect(trial.doStreamCalls).toHaveLength(1);

    const second = await runChain(engine, chain, clock);
    expect(second.parts[0]).toEqual({ type: 'text-delta', text: 'spare' });
    expect(trial.doStreamCalls).toHaveLength(1);

    first.unsubscribe(); // the trial ends: its slot is free again
    const third = chainCall$(chain, request, { snapshot: engine.snapshot, scheduler: clock }).subscribe();
    await settle();
    expect(trial.doStreamCalls).toHaveLength(2);
    third.unsubscribe();
    await engine.close();
  });

  it('counts the trial calls per provider, across every chain using it: two chains, halfOpenMaxCalls 1, one trial (issue 28 g)', async () => {
    const { clock, engine, trial, chain } = await halfOpenChain(1);
    // Another chain with the same provider (serve makes such pairs: a model's own chain, and a named chain).
    const alone: ProviderChain = { providers: [{ ...chain.providers[0]! }] };
    const first = chainCall$(alone, request, { snapshot: engine.snapshot, scheduler: clock }).subscribe();
    await settle();
    expect(trial.doStreamCalls).toHaveLength(1);
    const outputs: string[] = [];
    const second = chainCall$(chain, request, { snapshot: engine.snapshot, scheduler: clock }).subscribe((out) => {
      if (out.type === 'part' && out.part.type === 'text-delta') outputs.push(out.part.text);
    });
    await settle();
    expect(trial.doStreamCalls).toHaveLength(1);
    expect(outputs).toEqual(['spare']);
    first.unsubscribe();
    second.unsubscribe();
    await engine.close();
  });

  it('lets halfOpenMaxCalls trial calls through at once', async () => {
    const { clock, engine, trial, chain } = await halfOpenChain(2);
    const calls = [1, 2].map(() => chainCall$(chain, request, { snapshot: engine.snapshot, scheduler: clock }).subscribe());
    await settle();
    expect(trial.doStreamCalls).toHaveLength(2);
    const third = await runChain(engine, chain, clock);
    expect(third.parts[0]).toEqual({ type: 'text-delta', text: 'spare' });
    for (const call of calls) call.unsubscribe();
    await engine.close();
  });
});
