import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { catchError, lastValueFrom, map, of, take, throwError, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { createEngine, type Engine } from '../../../src/index.js';
import {
  AllProvidersFailedError,
  FallOverRefusedError,
  ModelCallTimeoutError,
  chainCall$,
  providerBreakerStream,
  scriptedModel,
  type ChainOutput,
  type ProviderChain,
} from '../../../src/agents.js';
import { sqliteStore } from '../../../src/streams/sqlite-store.js';
import { ManualClock, answering, breaker, collect, defined, failing, request, runChain, settle } from './support.js';

const text = (parts: readonly { type: string; text?: string }[]): string => parts.map((p) => p.text ?? '').join('');

async function withEngine<T>(run: (engine: Engine, clock: ManualClock) => Promise<T>): Promise<T> {
  const clock = new ManualClock();
  const engine = createEngine({ scheduler: clock });
  try {
    return await run(engine, clock);
  } finally {
    await engine.close();
  }
}

describe('providerBreakerStream', () => {
  it('names a provider’s breaker stream provider/<name>', () => {
    expect(providerBreakerStream('openai')).toBe('provider/openai');
  });
});

describe('chainCall$', () => {
  it('falls back from a failing provider to the next: its parts, a failure on the first breaker, a success on the second', () =>
    withEngine(async (engine, clock) => {
      const a = failing('a');
      const b = answering('b', 'Sunny in Oslo');
      const run = await runChain(
        engine,
        {
          providers: [
            { name: 'a', model: a },
            { name: 'b', model: b },
          ],
        },
        clock,
      );
      expect(run.error).toBeUndefined();
      expect(text(run.parts)).toBe('Sunny in Oslo');
      expect(run.parts.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
      expect(run.commands).toEqual(['spawn provider/a', 'provider/a failure', 'spawn provider/b', 'provider/b success']);
      expect(await breaker(engine, 'a')).toEqual({
        value: 'CLOSED',
        failureThreshold: 3,
        successThreshold: 1,
        openTimeoutMs: 30_000,
        failureCount: 1,
        successCount: 0,
        lastError: 'HTTP 500: upstream unavailable',
      });
      expect(await breaker(engine, 'b')).toMatchObject({ value: 'CLOSED', failureCount: 0 });
      // Both got the same request.
      expect(b.doStreamCalls[0]?.prompt).toEqual(a.doStreamCalls[0]?.prompt);
    }));

  it('emits the spawn command only for a breaker that does not exist yet, and a success only when it changes the breaker', () =>
    withEngine(async (engine, clock) => {
      const chain = { providers: [{ name: 'a', model: answering('a', 'hi') }] };
      expect((await runChain(engine, chain, clock)).commands).toEqual(['spawn provider/a', 'provider/a success']);
      // CLOSED with no failure counted: the success would change nothing.
      expect((await runChain(engine, chain, clock)).commands).toEqual([]);
    }));

  it('records a success that resets a failure count, then none while nothing fails', () =>
    withEngine(async (engine, clock) => {
      const model = scriptedModel([{ error: 'HTTP 500' }, { text: 'hi' }, { text: 'again' }], { modelId: 'a' });
      const chain: ProviderChain = { providers: [{ name: 'a', model }] };
      await runChain(engine, chain, clock);
      expect(await breaker(engine, 'a')).toMatchObject({ value: 'CLOSED', failureCount: 1 });
      expect((await runChain(engine, chain, clock)).commands).toEqual(['provider/a success']);
      expect(await breaker(engine, 'a')).toMatchObject({ value: 'CLOSED', failureCount: 0 });
      expect((await runChain(engine, chain, clock)).commands).toEqual([]);
    }));

  it('asks fallOverRefusal before falling over from an empty answer: a reason ends the call with it, the next provider uncalled', () =>
    withEngine(async (engine, clock) => {
      const empty = scriptedModel([{ usage: { inputTokens: 100, outputTokens: 0 } }], { modelId: 'empty', whenExhausted: 'cycle' });
      const next = answering('next', 'hello');
      const chain: ProviderChain = {
        providers: [
          { name: 'empty', model: empty },
          { name: 'next', model: next },
        ],
      };
      const asked: unknown[] = [];
      const refused = await lastValueFrom(
        chainCall$(chain, request, { snapshot: engine.snapshot, scheduler: clock, fallOverRefusal: (spent) => (asked.push(spent.usage), of('over budget')) }).pipe(
          toArray(),
          map(() => undefined),
          catchError((error: unknown) => of(error)),
        ),
      );
      expect(refused).toBeInstanceOf(FallOverRefusedError);
      expect(refused).toMatchObject({ reason: 'over budget', spent: { inputTokens: 100 } });
      expect(asked).toEqual([{ inputTokens: 100, outputTokens: 0, totalTokens: 100 }]);
      expect(next.doStreamCalls).toHaveLength(0);
      // Allowed: the chain falls over as before.
      const allowed = await collect(chainCall$(chain, request, { snapshot: engine.snapshot, scheduler: clock, fallOverRefusal: () => of(undefined) }));
      expect(allowed.error).toBeUndefined();
      expect(next.doStreamCalls).toHaveLength(1);
    }));

  it('does not ask fallOverRefusal after a provider that failed (no call billed) or when no provider is left', () =>
    withEngine(async (engine, clock) => {
      let asked = 0;
      const context = { snapshot: engine.snapshot, scheduler: clock, fallOverRefusal: () => (asked++, of('never')) };
      const failed = await collect(
        chainCall$(
          {
            providers: [
              { name: 'down', model: failing('down') },
              { name: 'up', model: answering('up', 'hi') },
            ],
          },
          request,
          context,
        ),
      );
      expect(failed.error).toBeUndefined();
      const lastEmpty = await collect(chainCall$({ providers: [{ name: 'only', model: scriptedModel([{}], { modelId: 'only' }) }] }, request, context));
      expect(lastEmpty.error).toBeInstanceOf(AllProvidersFailedError);
      expect(asked).toBe(0);
    }));

  it('records a success when the breaker counted a failure while the call ran (context.state)', () =>
    withEngine(async (engine, clock) => {
      const chain: ProviderChain = { providers: [{ name: 'a', model: answering('a', 'hi') }] };
      await runChain(engine, chain, clock);
      // Another call's failure, recorded after this call read the breaker and before it answered.
      const counted = { ...(await breaker(engine, 'a'))!, failureCount: 1 };
      const outputs = await lastValueFrom(chainCall$(chain, request, { snapshot: engine.snapshot, scheduler: clock, state: <S>() => counted as S }).pipe(toArray()));
      const commands = outputs.flatMap((output) => (output.type === 'command' && 'event' in output.command ? [output.command.event.type] : []));
      expect(commands).toEqual(['success']);
    }));

  it('opens a provider’s breaker at its failure threshold, then skips it while it is OPEN', () =>
    withEngine(async (engine, clock) => {
      const a = failing('a');
      const b = answering('b', 'from b');
      const chain: ProviderChain = {
        providers: [
          { name: 'a', model: a, breaker: { failureThreshold: 2 } },
          { name: 'b', model: b, breaker: { failureThreshold: 2 } },
        ],
      };
      await runChain(engine, chain, clock);
      expect(await breaker(engine, 'a')).toMatchObject({ value: 'CLOSED', failureCount: 1 });
      await runChain(engine, chain, clock);
      expect(await breaker(engine, 'a')).toMatchObject({ value: 'OPEN', failureCount: 2, failureThreshold: 2 });

      const third = await runChain(engine, chain, clock);
      expect(a.doStreamCalls).toHaveLength(2); // not called a third time
      expect(text(third.parts)).toBe('from b');
      expect(third.commands).toEqual([]); // b's success changes nothing
    }));

  it('with every breaker OPEN, still tries them all, in order, and records the outcomes', () =>
    withEngine(async (engine, clock) => {
      const a = scriptedModel([{ error: 'a is down' }, { error: 'a is still down' }], { modelId: 'a' });
      const b = scriptedModel([{ error: 'b is down' }, { text: 'b is back' }], { modelId: 'b' });
      const chain: ProviderChain = {
        providers: [
          { name: 'a', model: a, breaker: { failureThreshold: 1 } },
          { name: 'b', model: b, breaker: { failureThreshold: 1 } },
        ],
      };
      const first = await runChain(engine, chain, clock);
      expect(first.error).toBeInstanceOf(AllProvidersFailedError);
      expect((await breaker(engine, 'a'))?.value).toBe('OPEN');
      expect((await breaker(engine, 'b'))?.value).toBe('OPEN');

      const second = await runChain(engine, chain, clock);
      expect([a.doStreamCalls.length, b.doStreamCalls.length]).toEqual([2, 2]);
      expect(text(second.parts)).toBe('b is back');
      expect(second.commands).toEqual(['provider/a failure', 'provider/b success']);
      // A forced call's success is recorded but does not close the breaker: only its HALF_OPEN trial does.
      expect(await breaker(engine, 'b')).toMatchObject({ value: 'OPEN', failureCount: 0 });
      expect(await breaker(engine, 'a')).toMatchObject({ value: 'OPEN', failureCount: 2, lastError: 'a is still down' });
    }));

  it('lets a HALF_OPEN provider through for its trial call, whose success closes it', () =>
    withEngine(async (engine, clock) => {
      const chain: ProviderChain = {
        providers: [
          { name: 'a', model: scriptedModel([{ error: 'down' }, { text: 'a recovered' }]), breaker: { failureThreshold: 1 } },
          { name: 'b', model: answering('b', 'b'), breaker: { failureThreshold: 1 } },
        ],
      };
      await runChain(engine, chain, clock);
      expect((await breaker(engine, 'a'))?.value).toBe('OPEN');
      await engine.dispatch(providerBreakerStream('a'), { type: 'open_timeout_elapsed' });
      const trial = await runChain(engine, chain, clock);
      expect(text(trial.parts)).toBe('a recovered');
      expect((await breaker(engine, 'a'))?.value).toBe('CLOSED');
    }));

  it('fails with AllProvidersFailedError listing every provider’s failure when all fail', () =>
    withEngine(async (engine, clock) => {
      const refused = Object.assign(new Error('Internal Server Error'), { statusCode: 500 });
      const chain: ProviderChain = {
        providers: [
          { name: 'primary', model: scriptedModel([{ error: refused }]) },
          { name: 'backup', model: scriptedModel([{ error: new Error('fetch failed: ECONNREFUSED') }]) },
        ],
      };
      const run = await runChain(engine, chain, clock);
      const error = run.error as AllProvidersFailedError;
      expect(error).toBeInstanceOf(AllProvidersFailedError);
      expect(error.message).toMatchInlineSnapshot(`"all providers failed: "primary": HTTP 500: Internal Server Error; "backup": fetch failed: ECONNREFUSED"`);
      expect(error.failures.map((f) => f.provider)).toEqual(['primary', 'backup']);
      expect(error.failures[0]?.error).toMatchObject({ name: 'ProviderFailedError', provider: 'primary', statusCode: 500, cause: refused });
      expect(run.parts).toEqual([]);
      expect(run.commands).toEqual(['spawn provider/primary', 'provider/primary failure', 'spawn provider/backup', 'provider/backup failure']);
      expect((await breaker(engine, 'primary'))?.lastError).toBe('HTTP 500: Internal Server Error');
    }));

  it('names the providers it skipped when the ones it tried all failed', () =>
    withEngine(async (engine, clock) => {
      const chain: ProviderChain = {
        providers: [
          { name: 'a', model: failing('a'), breaker: { failureThreshold: 1 } },
          { name: 'b', model: failing('b'), breaker: { failureThreshold: 1 } },
        ],
      };
      await engine.spawn(providerBreakerStream('a'), 'circuit-breaker', { failureThreshold: 1, successThreshold: 1, openTimeoutMs: 1000 });
      await engine.dispatch(providerBreakerStream('a'), { type: 'failure', error: 'earlier' });
      const run = await runChain(engine, chain, clock);
      expect((run.error as Error).message).toBe('all providers failed: "b": HTTP 500: upstream unavailable; skipped, breaker OPEN: "a"');
      expect((run.error as AllProvidersFailedError).skipped).toEqual(['a']);
    }));

  it('does not fall back in the middle of an answer: the error is recorded as a failure and ends the output', () =>
    withEngine(async (engine, clock) => {
      const dropped = new Error('connection reset');
      const b = answering('b', 'never asked');
      const chain: ProviderChain = {
        providers: [
          { name: 'a', model: scriptedModel([{ text: 'It is sunny and', error: dropped, afterDeltas: 3 }]) },
          { name: 'b', model: b },
        ],
      };
      const run = await runChain(engine, chain, clock);
      expect(text(run.parts)).toBe('It is sunny');
      expect(run.error).toMatchObject({ name: 'ProviderFailedError', provider: 'a', message: 'provider "a" failed: connection reset', cause: dropped });
      expect(run.commands).toEqual(['spawn provider/a', 'provider/a failure']);
      expect(b.doStreamCalls).toHaveLength(0);
      expect(await breaker(engine, 'a')).toMatchObject({ failureCount: 1, lastError: 'connection reset' });
    }));

  it('falls back from a provider that hangs once its callTimeoutMs passes (virtual time)', () =>
    withEngine(async (engine, clock) => {
      const a = scriptedModel([{ hang: true }], { modelId: 'a' });
      const chain: ProviderChain = {
        providers: [
          { name: 'a', model: a },
          { name: 'b', model: answering('b', 'b answers') },
        ],
        callTimeoutMs: 20_000,
      };
      const running = runChain(engine, chain, clock);
      for (let i = 0; i < 100 && clock.actions.length === 0; i++) await settle(); // a's timer is armed
      clock.advanceTo(19_999);
      await settle();
      expect(a.doStreamCalls[0]?.abortSignal?.aborted).toBe(false);
      clock.advanceTo(20_000);
      const run = await running;
      expect(text(run.parts)).toBe('b answers');
      expect(a.doStreamCalls[0]?.abortSignal?.aborted).toBe(true);
      expect(run.commands).toEqual(['spawn provider/a', 'provider/a failure', 'spawn provider/b', 'provider/b success']);
      const state = defined(await breaker(engine, 'a'));
      expect(state.lastError).toBe(new ModelCallTimeoutError('scripted/a', 20_000).message);
    }));

  it('aborts the call in progress and records nothing when unsubscribed mid-answer', async () => {
    const clock = new ManualClock();
    const a = scriptedModel([{ text: 'one two three', hang: true, afterDeltas: 1 }]);
    const outputs: ChainOutput[] = [];
    const subscription = chainCall$({ providers: [{ name: 'a', model: a }] }, request, { snapshot: () => of(undefined), scheduler: clock }).subscribe((output) =>
      outputs.push(output),
    );
    for (let i = 0; i < 100 && outputs.length === 0; i++) await settle();
    subscription.unsubscribe();
    expect(a.doStreamCalls[0]?.abortSignal?.aborted).toBe(true);
    await settle();
    expect(outputs).toEqual([{ type: 'part', part: { type: 'text-delta', text: 'one' } }]);
  });

  it('lets a call through when its breaker cannot be read, and spawns it with the outcome', async () => {
    const { values } = await collect(
      chainCall$({ providers: [{ name: 'a', model: answering('a', 'ok') }] }, request, {
        snapshot: () => throwError(() => new Error('store offline')),
        scheduler: new ManualClock(),
      }),
    );
    expect(values.filter((o) => o.type === 'command')).toEqual([
      { type: 'command', command: { stream: 'provider/a', spawn: 'circuit-breaker', input: { failureThreshold: 3, successThreshold: 1, openTimeoutMs: 30_000 } } },
      { type: 'command', command: { stream: 'provider/a', event: { type: 'success' } } },
    ]);
  });

  it('refuses a chain without providers, with a name twice, with a bad breaker configuration or call timeout', () => {
    const context = { snapshot: () => of(undefined), scheduler: new ManualClock() };
    const model = answering('m', 'x');
    expect(() => chainCall$({ providers: [] }, request, context)).toThrow('chainCall$: a chain needs at least one provider in "providers"');
    expect(() =>
      chainCall$(
        {
          providers: [
            { name: 'a', model },
            { name: 'a', model },
          ],
        },
        request,
        context,
      ),
    ).toThrow('chainCall$: provider name "a" appears twice; each names its own breaker');
    expect(() => chainCall$({ providers: [{ name: 'a', model, breaker: { failureThreshold: 0 } }] }, request, context)).toThrow(
      'chainCall$: provider "a": invalid "breaker": failureThreshold: Too small: expected number to be >0',
    );
    expect(() => chainCall$({ providers: [{ name: 'a', model }], callTimeoutMs: -1 }, request, context)).toThrow(
      'chainCall$: "callTimeoutMs" must be positive (or Infinity: no timeout), got -1',
    );
  });
});

describe('a provider has one breaker with one setting (issue 28 g)', () => {
  it('refuses a chain\'s "breaker": the settings are each provider\'s own', () => {
    const context = { snapshot: () => of(undefined), scheduler: new ManualClock() };
    const chain = { providers: [{ name: 'a', model: answering('a', 'x') }], breaker: { failureThreshold: 1 } } as ProviderChain;
    expect(() => chainCall$(chain, request, context)).toThrow(
      'chainCall$: a chain has no "breaker": each provider\'s breaker has its own settings; set "breaker" on the provider ({ name: "a", model, breaker })',
    );
  });

  it('a restart with an edited breaker setting applies it, and records the change as a rune (SQLite file)', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'runestream-breaker-')), 'log.db');
    try {
      const clock = new ManualClock();
      const before = createEngine({ store: sqliteStore(file), scheduler: clock });
      await runChain(before, { providers: [{ name: 'a', model: failing('a'), breaker: { failureThreshold: 3 } }] }, clock);
      expect(await breaker(before, 'a')).toMatchObject({ value: 'CLOSED', failureCount: 1, failureThreshold: 3 });
      await before.close();

      // The setting is edited: the next process opens the breaker at its second failure, not its third.
      const after = createEngine({ store: sqliteStore(file), scheduler: clock });
      const run = await runChain(after, { providers: [{ name: 'a', model: failing('a'), breaker: { failureThreshold: 2, openTimeoutMs: 5000 } }] }, clock);
      expect(run.commands).toEqual(['provider/a settings_changed', 'provider/a failure']);
      expect(await breaker(after, 'a')).toMatchObject({ value: 'OPEN', failureCount: 2, failureThreshold: 2, openTimeoutMs: 5000 });
      const kinds = await lastValueFrom(
        after.runes$('provider/a').pipe(
          map((rune) => rune.kind),
          take(4),
          toArray(),
        ),
      );
      expect(kinds).toEqual(['spawned', 'failure', 'settings_changed', 'failure']);
      // The same settings again: nothing more to record.
      const again = await runChain(after, { providers: [{ name: 'a', model: failing('a'), breaker: { failureThreshold: 2, openTimeoutMs: 5000 } }] }, clock);
      expect(again.commands).toEqual(['provider/a failure']);
      await after.close();
    } finally {
      rmSync(dirname(file), { recursive: true, force: true });
    }
  });
});
