import { filter, firstValueFrom } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { describe, expect, it } from 'vitest';
import { createEngine, memoryStore, type CircuitBreakerState, type Rune, type RuneStore } from '../../../src/index.js';
import { providerBreakerStream, providerBreakers, scriptedModel, type ProviderChain } from '../../../src/agents.js';
import { epicContext } from '../../support/epic-context.js';
import { ManualClock, answering, breaker, runChain, settle } from './support.js';

const OPEN_TIMEOUT = 5000;
const state: CircuitBreakerState = {
  value: 'OPEN',
  failureThreshold: 1,
  successThreshold: 1,
  openTimeoutMs: OPEN_TIMEOUT,
  failureCount: 1,
  successCount: 0,
};

/** A breaker rune of `stream` (by default a provider's), `from` -> `to`, at `at`. */
const rune = (stream: string, type: string, from: string, to: string, at: number, machine = 'circuit-breaker'): Rune => ({
  stream,
  seq: 2,
  machine,
  kind: type,
  event: { type },
  from,
  to,
  at,
});
const elapsed = (name: string) => ({ stream: providerBreakerStream(name), event: { type: 'open_timeout_elapsed' }, by: 'timer' });

describe('providerBreakers epic', () => {
  it('half-opens a breaker openTimeoutMs after it went OPEN; a forced call’s outcome does not move the clock; leaving OPEN disarms it', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, expectObservable }) => {
      const runes = hot<Rune>('1000ms a 999ms b 999ms c 999ms d 2499ms e', {
        a: rune('provider/a', 'failure', 'CLOSED', 'OPEN', 1000), // due at 6000
        b: rune('provider/b', 'failure', 'CLOSED', 'OPEN', 2000), // due at 7000, but reset at 4000
        c: rune('provider/a', 'failure', 'OPEN', 'OPEN', 3000), // a forced call failed: still due at 6000
        d: rune('provider/b', 'manual_reset', 'OPEN', 'CLOSED', 4000),
        e: rune('provider/a', 'open_timeout_elapsed', 'OPEN', 'HALF_OPEN', 6500), // the timeout's own rune
      });
      const commands = providerBreakers()(runes, epicContext(scheduler, { state: () => state as never }), undefined);
      expectObservable(commands, '^ 30s !').toBe('6000ms x', { x: elapsed('a') });
    });
  });

  it('sends the timeout again when no rune answered it, until one does', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, expectObservable }) => {
      const runes = hot<Rune>('1000ms a 15499ms b', {
        a: rune('provider/a', 'failure', 'HALF_OPEN', 'OPEN', 1000),
        b: rune('provider/a', 'open_timeout_elapsed', 'OPEN', 'HALF_OPEN', 16_500),
      });
      const commands = providerBreakers()(runes, epicContext(scheduler, { state: () => state as never }), undefined);
      // Sent at 6000; its dispatch left no rune; again every openTimeoutMs (5 s) until the rune at 16.5 s.
      expectObservable(commands, '^ 60s !').toBe('6000ms x 4999ms x 4999ms x', { x: elapsed('a') });
    });
  });

  it('arms no clock for a breaker an operator keeps OPEN (issue 28 g)', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, expectObservable }) => {
      const runes = hot<Rune>('1000ms a 2999ms b', {
        a: rune('provider/a', 'failure', 'CLOSED', 'OPEN', 1000),
        b: rune('provider/a', 'manual_keep_open', 'OPEN', 'OPEN', 4000),
      });
      const kept = { ...state, keptOpen: true as const };
      let current: CircuitBreakerState = state;
      const context = epicContext(scheduler, { state: () => current as never });
      scheduler.schedule(() => (current = kept), 4000);
      // Due at 6000 before the operator's rune; none after it.
      expectObservable(providerBreakers()(runes, context, undefined), '^ 60s !').toBe('');
    });
  });

  it('times only providers’ breakers: by default every provider/ stream, or the given chain’s providers', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, expectObservable }) => {
      const runes = hot<Rune>('(abcd)', {
        a: rune('provider/a', 'failure', 'CLOSED', 'OPEN', 0),
        b: rune('provider/b', 'failure', 'CLOSED', 'OPEN', 0),
        c: rune('db/primary', 'failure', 'CLOSED', 'OPEN', 0), // a breaker, not a provider's
        d: rune('provider/c', 'x', 'CLOSED', 'OPEN', 0, 'connection'), // a provider/ stream of another machine
      });
      const context = epicContext(scheduler, { state: () => state as never });
      expectObservable(providerBreakers()(runes, context, undefined), '^ 9s !').toBe('5000ms (ab)', { a: elapsed('a'), b: elapsed('b') });
      const chain: ProviderChain = { providers: [{ name: 'b', model: answering('b', ''), breaker: { openTimeoutMs: 1 } }] };
      expectObservable(providerBreakers(chain)(runes, context, undefined), '^ 9s !').toBe('5000ms b', { b: elapsed('b') });
      expectObservable(providerBreakers({ providers: ['a'] })(runes, context, undefined), '^ 9s !').toBe('5000ms a', { a: elapsed('a') });
    });
  });

  it('refuses a resolution that is not positive', () => {
    expect(() => providerBreakers({ resolutionMs: 0 })).toThrow('providerBreakers: "resolutionMs" must be positive, got 0');
  });
});

describe('providerBreakers across a restart: durable clocks', () => {
  /**
   * provider/a opens at 1 s (openTimeoutMs 30 s: due at 31 s), then 40 calls forced through it fail
   * until 5 s; the process dies. Another engine on the same store starts at `restartAt`.
   */
  async function openBreakerThenRestartAt(restartAt: number) {
    const stored = memoryStore();
    const store: RuneStore = { ...stored, close: async () => {} }; // the store outlives the engines, as a file would
    const before = new ManualClock();
    const crashed = createEngine({ store, scheduler: before });
    await crashed.spawn('provider/a', 'circuit-breaker', { failureThreshold: 1, successThreshold: 1, openTimeoutMs: 30_000 });
    before.frame = 1000;
    await crashed.dispatch('provider/a', { type: 'failure', error: 'down' });
    for (let i = 0; i < 40; i++) {
      before.frame = 2000 + i * 75;
      await crashed.dispatch('provider/a', { type: 'failure', error: 'still down' });
    }
    await crashed.close();

    const clock = new ManualClock(restartAt);
    const engine = createEngine({ store, scheduler: clock, epics: [providerBreakers()] });
    const halfOpen = firstValueFrom(engine.runes$().pipe(filter((r) => r.kind === 'open_timeout_elapsed')));
    for (let i = 0; i < 100 && clock.actions.length === 0; i++) await settle(); // epics start, list the OPEN breakers, arm
    return { engine, clock, halfOpen, stored };
  }

  it('re-arms an OPEN breaker at its original deadline (from the rune that opened it), not a full timeout after the restart', async () => {
    const { engine, clock, halfOpen } = await openBreakerThenRestartAt(10_000);
    let fired = false;
    void halfOpen.then(() => (fired = true));
    clock.advanceTo(30_999);
    await settle();
    expect(fired).toBe(false);
    clock.advanceTo(31_000);
    expect(await halfOpen).toMatchObject({ stream: 'provider/a', from: 'OPEN', to: 'HALF_OPEN', at: 31_000 });
    await engine.close();
  });

  it('fires at once when the deadline passed while the process was down', async () => {
    const { engine, clock, halfOpen } = await openBreakerThenRestartAt(40_000);
    clock.advanceTo(40_000);
    expect(await halfOpen).toMatchObject({ to: 'HALF_OPEN', at: 40_000 });
    await engine.close();
  });
});

describe('providerBreakers with chainCall$ in an engine', () => {
  it('at start, records edited settings on a stored breaker: settings_changed, and its OPEN clock uses them (issue 28 g)', async () => {
    const stored = memoryStore();
    const store: RuneStore = { ...stored, close: async () => {} }; // the store outlives the engines, as a file would
    const before = createEngine({ store, scheduler: new ManualClock() });
    await before.spawn('provider/a', 'circuit-breaker', { failureThreshold: 1, successThreshold: 1, openTimeoutMs: 600_000 });
    await before.dispatch('provider/a', { type: 'failure', error: 'down' });
    await before.close();

    const clock = new ManualClock(1000);
    const provider = { name: 'a', model: answering('a', 'back'), breaker: { failureThreshold: 1, openTimeoutMs: 5000 } };
    const engine = createEngine({ store, scheduler: clock, epics: [providerBreakers({ providers: [provider] })] });
    const changed = firstValueFrom(engine.runes$().pipe(filter((r) => r.kind === 'settings_changed')));
    const halfOpen = firstValueFrom(engine.runes$().pipe(filter((r) => r.to === 'HALF_OPEN')));
    expect((await changed).event).toEqual({ type: 'settings_changed', settings: { failureThreshold: 1, successThreshold: 1, openTimeoutMs: 5000 } });
    for (let i = 0; i < 100 && clock.actions.length === 0; i++) await settle();
    clock.advanceTo(5000); // opened at 0, now 5 s open: not the stored 600 s
    expect(await halfOpen).toMatchObject({ at: 5000 });
    await engine.close();
  });

  it('a provider whose breaker opened is skipped, half-opened after openTimeoutMs, tried again, and closed by its success', async () => {
    const clock = new ManualClock();
    const engine = createEngine({ scheduler: clock, epics: [providerBreakers()] });
    const a = scriptedModel([{ error: 'HTTP 503' }, { text: 'a is back' }], { modelId: 'a' });
    const chain: ProviderChain = {
      providers: [
        { name: 'a', model: a, breaker: { failureThreshold: 1, openTimeoutMs: 60_000 } },
        { name: 'b', model: answering('b', 'b answers'), breaker: { failureThreshold: 1, openTimeoutMs: 60_000 } },
      ],
    };
    await runChain(engine, chain, clock);
    expect((await breaker(engine, 'a'))?.value).toBe('OPEN');
    expect((await runChain(engine, chain, clock)).parts[0]).toEqual({ type: 'text-delta', text: 'b' });
    expect(a.doStreamCalls).toHaveLength(1);

    const halfOpen = firstValueFrom(engine.runes$().pipe(filter((r) => r.to === 'HALF_OPEN')));
    clock.advanceTo(60_000);
    expect(await halfOpen).toMatchObject({ stream: 'provider/a', at: 60_000 });
    const trial = await runChain(engine, chain, clock);
    expect(trial.parts[0]).toEqual({ type: 'text-delta', text: 'a' });
    expect((await breaker(engine, 'a'))?.value).toBe('CLOSED');
    await engine.close();
  });
});
