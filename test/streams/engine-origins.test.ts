import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { filter, map, mergeMap, of, take, VirtualTimeScheduler, type Observable } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  CALLER_ORIGIN,
  clientOrigin,
  createEngine,
  defineMachine,
  durableDeadline,
  Rune,
  stateEffects,
  type Engine,
  type EngineOptions,
  type Epic,
  type EpicCommand,
} from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { firedByTimer } from '../../src/streams/fired-by-timer.js';
import { triesAfterLoss } from '../../src/streams/engine/other-writers.js';
import type { PendingRune } from '../../src/streams/commit-queue.js';
import type { Instance } from '../../src/streams/engine/instance.js';
import { promiseSink, PromisedDispatch } from '../../src/streams/submit.js';

// A counter that asks for a reply to every `add` and can wait for a deadline.
const CounterState = z.object({ value: z.enum(['counting', 'waiting']), n: z.number() });
type CounterState = z.infer<typeof CounterState>;
const CounterEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('add'), by: z.number() }),
  z.object({ type: z.literal('reply'), to: z.number() }),
  z.object({ type: z.literal('wait') }),
  z.object({ type: z.literal('timeout') }),
]);
type CounterEvent = z.infer<typeof CounterEvent>;
const counter = defineMachine<CounterState, CounterEvent>({
  id: 'counter',
  states: ['counting', 'waiting'],
  terminal: [],
  events: ['add', 'reply', 'wait', 'timeout'],
  schemas: { state: CounterState, event: CounterEvent, input: z.void() },
  initial: () => ({ value: 'counting', n: 0 }),
  table: [
    { from: 'counting', on: 'add', assign: (s, e) => ({ n: s.n + e.by }) },
    { from: 'counting', on: 'reply' },
    { from: 'counting', on: 'wait', to: 'waiting' },
    { from: 'waiting', on: 'timeout', to: 'counting' },
  ],
});

const dirs: string[] = [];
const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const engineWith = (options: EngineOptions = {}): Engine => {
  const engine = createEngine({ machines: { counter }, ...options });
  engines.push(engine);
  return engine;
};
const originsOf = async (engine: Engine, stream: string) => {
  const runes: Rune[] = [];
  await new Promise<void>((resolve) => {
    engine.runes$(stream).subscribe((rune) => runes.push(rune));
    setTimeout(resolve, 0);
  });
  return runes.map((rune) => [rune.event.type, rune.origin]);
};

/** Replies to each `add`; the reply to an add of 2 is marked as a model's answer. */
const replies: Epic = function replies(runes$) {
  return runes$.pipe(
    filter((rune) => rune.event.type === 'add'),
    map((rune): EpicCommand => ({ stream: rune.stream, event: { type: 'reply', to: rune.seq }, ...(rune.event.by === 2 ? { by: 'model' as const } : {}) })),
  );
};

describe('rune origins: what each event came from', () => {
  it("a dispatch or spawn that names no origin is the caller's, { by: 'client' }; a client's identity is recorded; the log keeps both through a restart", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runestream-origins-'));
    dirs.push(dir);
    const file = join(dir, 'log.db');
    const first = engineWith({ store: sqliteStore(file) });
    expect(await first.spawn('c', 'counter')).toMatchObject({ accepted: true, rune: { origin: { by: 'client' } } });
    const ada = clientOrigin('ada');
    expect(await first.dispatch('c', { type: 'add', by: 1 }, { origin: ada })).toMatchObject({ accepted: true, rune: { seq: 2, origin: { by: 'client', identity: 'ada' } } });
    await first.close();
    const second = engineWith({ store: sqliteStore(file) });
    expect(await originsOf(second, 'c')).toEqual([
      ['spawn', { by: 'client' }],
      ['add', { by: 'client', identity: 'ada' }],
    ]);
    expect(clientOrigin()).toBe(CALLER_ORIGIN);
  });

  it('an origin that is not a RuneOrigin is refused as invalid_origin, naming what is wrong, and nothing is appended', async () => {
    const engine = engineWith();
    await engine.spawn('c', 'counter');
    const refusals = [
      { origin: { by: 'user' }, says: 'by' },
      { origin: { by: 'client', identity: 'x'.repeat(257) }, says: 'identity' },
      { origin: { by: 'client', identity: 'a\u0000b' }, says: 'NUL' },
      { origin: { by: 'epic' }, says: 'epic' },
      { origin: 'client', says: 'invalid origin' },
    ];
    for (const { origin, says } of refusals) {
      const result = await engine.dispatch('c', { type: 'add', by: 1 }, { origin: origin as never });
      expect(result).toMatchObject({ accepted: false, code: 'invalid_origin' });
      expect(result.accepted ? '' : result.reason).toContain(says);
    }
    expect(await engine.spawn('d', 'counter', undefined, { origin: { by: 'timer' } as never })).toMatchObject({ accepted: false, code: 'invalid_origin' });
    expect(await engine.snapshot('c')).toMatchObject({ seq: 1 });
    expect(await engine.snapshot('d')).toBeUndefined();
  });

  it("records a frozen copy of a caller's origin: its unknown keys dropped, its later changes reaching no rune", async () => {
    const engine = engineWith();
    await engine.spawn('c', 'counter');
    const origin = { by: 'client' as const, identity: 'ada', password: 'hunter2' };
    const result = await engine.dispatch('c', { type: 'add', by: 1 }, { origin });
    origin.identity = 'mallory';
    expect(result.accepted && result.rune.origin).toEqual({ by: 'client', identity: 'ada' });
    expect(result.accepted && Object.isFrozen(result.rune.origin)).toBe(true);
  });

  it("an epic's commands say the epic by name; a command's `by` says a model, a tool or a timer made it; an epic's spawn says the epic too", async () => {
    const spawner: Epic = function spawner(runes$) {
      return runes$.pipe(
        filter((rune) => rune.stream === 'c' && rune.event.type === 'reply'),
        take(1),
        map((): EpicCommand => ({ stream: 'c2', spawn: 'counter' })),
      );
    };
    const engine = engineWith({ epics: [replies, spawner] });
    await engine.spawn('c', 'counter');
    await engine.dispatch('c', { type: 'add', by: 1 });
    await engine.dispatch('c', { type: 'add', by: 2 });
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(await originsOf(engine, 'c')).toEqual([
      ['spawn', { by: 'client' }],
      ['add', { by: 'client' }],
      ['reply', { by: 'epic', epic: 'replies' }],
      ['add', { by: 'client' }],
      ['reply', { by: 'model', epic: 'replies' }],
    ]);
    expect(await originsOf(engine, 'c2')).toEqual([['spawn', { by: 'epic', epic: 'spawner' }]]);
  });

  it('an epic with no function name is named by its position', async () => {
    const engine = engineWith({
      epics: [
        (runes$: Observable<Rune>) =>
          runes$.pipe(
            filter((rune) => rune.event.type === 'add'),
            map((rune) => ({ stream: rune.stream, event: { type: 'reply', to: rune.seq } })),
          ),
      ],
    });
    await engine.spawn('c', 'counter');
    await engine.dispatch('c', { type: 'add', by: 1 });
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect((await originsOf(engine, 'c')).at(-1)).toEqual(['reply', { by: 'epic', epic: 'epic #1' }]);
  });

  it("a durable deadline's event says a timer made it: given to stateEffects as it is, or piped through firedByTimer", async () => {
    const scheduler = new VirtualTimeScheduler();
    const asData = stateEffects({
      name: 'waitAsData',
      machine: counter,
      states: ['waiting'],
      effects: (view, context) => (view.stream === 'a' ? { timeout: durableDeadline(view.at + 1000, { type: 'timeout' as const }, context) } : {}),
    });
    const piped = stateEffects({
      name: 'waitPiped',
      machine: counter,
      states: ['waiting'],
      effects: (view, context) =>
        view.stream === 'b'
          ? {
              timeout: of(view.at + 1000).pipe(
                mergeMap((at) => durableDeadline(at, { type: 'timeout' as const }, context)),
                firedByTimer(view.stream),
              ),
            }
          : {},
    });
    const engine = engineWith({ scheduler, epics: [asData, piped] });
    for (const stream of ['a', 'b']) {
      await engine.spawn(stream, 'counter');
      await engine.dispatch(stream, { type: 'wait' });
    }
    scheduler.flush();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect((await originsOf(engine, 'a')).at(-1)).toEqual(['timeout', { by: 'timer', epic: 'waitAsData' }]);
    expect((await originsOf(engine, 'b')).at(-1)).toEqual(['timeout', { by: 'timer', epic: 'waitPiped' }]);
  });

  it('a dispatch that lost a seq race is tried again with its origin', () => {
    const pending = (seq: number, origin?: Rune['origin']): PendingRune<Instance> => {
      const rune: Rune = { stream: 'c', seq, machine: 'counter', kind: 'add', event: { type: 'add', by: 1 }, at: 5 };
      if (origin !== undefined) rune.origin = origin;
      return { instance: {} as Instance, rune, state: {}, sink: promiseSink, token: new PromisedDispatch() };
    };
    const { retries } = triesAfterLoss([pending(2, { by: 'client', identity: 'ada' }), pending(3)], 5);
    expect(retries.map((retry) => retry.origin)).toEqual([{ by: 'client', identity: 'ada' }, CALLER_ORIGIN]);
  });

  it('the Rune schema reads a rune with an origin and one without (written before runes had origins), and refuses an origin it does not know', () => {
    const rune = { stream: 'c', seq: 2, machine: 'counter', kind: 'add', event: { type: 'add', by: 1 }, at: 5 };
    expect(Rune.parse(rune)).toEqual(rune);
    expect(Rune.parse({ ...rune, origin: { by: 'tool', epic: 'toolCallEffects' } }).origin).toEqual({ by: 'tool', epic: 'toolCallEffects' });
    expect(Rune.safeParse({ ...rune, origin: { by: 'cron' } }).success).toBe(false);
  });
});
