import { createHook } from 'node:async_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Subject, from, lastValueFrom, map, toArray } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { chatActor } from '../../src/index.js';
import { dispatchTo } from '../../src/streams/dispatch-to.js';
import { createEngine, type DispatchResult, type Engine } from '../../src/streams/engine.js';
import { memoryStore } from '../../src/streams/memory-store.js';
import { sqliteStore } from '../../src/streams/sqlite-store.js';
import { StoreError, type RuneStore } from '../../src/streams/store.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const interact = { type: 'ProcessInteraction', userId } as const;
const complete = { type: 'InteractionComplete', success: true } as const;
const nope = { type: 'Nope' } as const;

/** A result as one letter-friendly value: the rune's seq, or the rejection's code. */
const outcome = (r: DispatchResult): number | string => (r.accepted ? r.rune.seq : r.code);

/** A memory store without `appendSync`: every rune goes through batched `append`, as with SQLite. */
const batchingStore = (append?: RuneStore['append']): RuneStore => {
  const inner = memoryStore();
  return { ...inner, appendSync: undefined, append: append ?? ((runes) => inner.append(runes)) };
};

async function spawned(store?: RuneStore): Promise<Engine> {
  const engine = createEngine(store === undefined ? {} : { store });
  const result = await engine.spawn('chat-1', chatActor);
  expect(result.accepted).toBe(true);
  return engine;
}

const marbles = () => new TestScheduler((actual, expected) => expect(actual).toEqual(expected));

describe('dispatchTo (memory store: each result at once)', () => {
  it('emits each result in source order, a rejection as a result, and completes after the last', async () => {
    const engine = await spawned();
    marbles().run(({ cold, expectObservable, expectSubscriptions }) => {
      const events = cold('a-x-b-a|', { a: interact, b: complete, x: nope });
      expectObservable(events.pipe(dispatchTo(engine, 'chat-1'), map(outcome))).toBe('a-x-b-c|', { a: 2, x: 'unknown_event', b: 3, c: 4 });
      expectSubscriptions(events.subscriptions).toBe('^------!');
    });
    expect((await engine.snapshot('chat-1'))?.seq).toBe(4);
    await engine.close();
  });

  it('stops dispatching when unsubscribed; what was accepted stays', async () => {
    const engine = await spawned();
    marbles().run(({ cold, expectObservable, expectSubscriptions }) => {
      const events = cold('a-b-a-b|', { a: interact, b: complete });
      expectObservable(events.pipe(dispatchTo(engine, 'chat-1'), map(outcome)), '---!').toBe('a-b', { a: 2, b: 3 });
      expectSubscriptions(events.subscriptions).toBe('^--!');
    });
    expect((await engine.snapshot('chat-1'))?.seq).toBe(3);
    await engine.close();
  });

  it('passes a source error on, and dispatches nothing for an empty source', async () => {
    const engine = await spawned();
    marbles().run(({ cold, expectObservable }) => {
      expectObservable(cold('a-#', { a: interact }).pipe(dispatchTo(engine, 'chat-1'), map(outcome))).toBe('a-#', { a: 2 });
      expectObservable(cold('--|').pipe(dispatchTo(engine, 'chat-1'))).toBe('--|');
    });
    expect((await engine.snapshot('chat-1'))?.seq).toBe(2);
    await engine.close();
  });

  it('refuses an engine it cannot dispatch to, and a stream id that is not a string', async () => {
    const engine = await spawned();
    const { submit: _submit, ...withoutSubmit } = engine;
    expect(() => dispatchTo(withoutSubmit as Engine, 'chat-1')).toThrow(new TypeError('dispatchTo: "engine" must be an engine (with submit), got object'));
    expect(() => dispatchTo(null as unknown as Engine, 'chat-1')).toThrow(new TypeError('dispatchTo: "engine" must be an engine (with submit), got null'));
    expect(() => dispatchTo(engine, 7 as unknown as string)).toThrow(new TypeError('dispatchTo: "stream" must be a string, got number'));
    await engine.close();
  });

  it('gives the limits and an unknown stream as results, like dispatch', async () => {
    const engine = createEngine({ limits: { maxDepth: 2 } });
    await engine.spawn('chat-1', chatActor);
    const results = await lastValueFrom(from([{ type: 'Pause', reason: 'x', extra: { a: { b: 1 } } }, interact]).pipe(dispatchTo(engine, 'chat-1'), map(outcome), toArray()));
    expect(results).toEqual(['too_deep', 2]);
    expect(await lastValueFrom(from([interact]).pipe(dispatchTo(engine, 'nobody'), map(outcome)))).toBe('unknown_stream');
    await engine.close();
  });
});

describe('dispatchTo (batching stores: each result once its batch commits)', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'runestream-dispatch-to-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('on a real SQLite file, emits in source order only after each rune is durable, also while the stream hydrates', async () => {
    const path = join(dir, 'runes.db');
    const first = createEngine({ store: sqliteStore(path) });
    await first.spawn('chat-1', chatActor);
    await first.close();

    // A fresh engine on the file: the stream is hydrated on the first event, the rest wait for it.
    const engine = createEngine({ store: sqliteStore(path) });
    const events: unknown[] = Array.from({ length: 10_000 }, (_, i) => (i % 2 === 0 ? interact : complete));
    events.splice(5_000, 0, nope);
    let durableSeq = 1;
    const durable = engine.runes$('chat-1', { afterSeq: 1 }).subscribe((rune) => (durableSeq = rune.seq));
    const emitted: (number | string)[] = [];
    const done = new Promise<void>((resolve, reject) =>
      from(events)
        .pipe(dispatchTo(engine, 'chat-1'))
        .subscribe({
          next: (result) => {
            // Published after its commit: a result never comes before its rune is durable.
            if (result.accepted) expect(result.rune.seq).toBeLessThanOrEqual(durableSeq);
            emitted.push(outcome(result));
          },
          error: reject,
          complete: resolve,
        }),
    );
    expect(emitted).toEqual([]); // nothing is durable before the batch commits
    await done;
    durable.unsubscribe();
    let seq = 1;
    expect(emitted).toEqual(events.map((e) => (e === nope ? 'unknown_event' : ++seq)));
    await engine.close();
    const reopened = sqliteStore(path);
    expect((await reopened.head('chat-1'))?.seq).toBe(seq);
    await reopened.close();
  });

  it('errors with the store failure; results before it were emitted', async () => {
    const failure = new StoreError('disk_full', 'the disk is full; nothing was written');
    let appends = 0;
    const inner = memoryStore();
    // The spawn is the first append, the first event the second; the third fails.
    const engine = await spawned(batchingStore(async (runes) => (++appends <= 2 ? inner.append(runes) : Promise.reject(failure))));
    const events = new Subject<unknown>();
    const seen: (number | string)[] = [];
    let firstSeen!: () => void;
    const first = new Promise<void>((resolve) => (firstSeen = resolve));
    const ended = new Promise<unknown>((resolve) =>
      events.pipe(dispatchTo(engine, 'chat-1')).subscribe({ next: (r) => (seen.push(outcome(r)), firstSeen()), error: resolve }),
    );
    events.next(interact);
    await first;
    events.next(complete);
    events.next(interact);
    expect(await ended).toBe(failure);
    expect(seen).toEqual([2]);
    await engine.close();
  });

  it('makes no promise per event: 1,000,000 synchronous events, the engine batch queue holds them', async () => {
    const engine = await spawned(batchingStore());
    const count = 1_000_000;
    function* events(): Generator<unknown> {
      for (let i = 0; i < count; i++) yield i % 2 === 0 ? interact : complete;
    }
    let promises = 0;
    const hook = createHook({ init: (_id, type) => void (type === 'PROMISE' && promises++) });
    let results = 0;
    let last: DispatchResult | undefined;
    const done = new Promise<void>((resolve, reject) => {
      hook.enable();
      from(events())
        .pipe(dispatchTo(engine, 'chat-1'))
        .subscribe({ next: (r) => ((results += 1), (last = r)), error: reject, complete: resolve });
      hook.disable();
    });
    // Every event was applied and queued synchronously, with a handful of promises for the batch.
    expect(promises).toBeLessThan(10);
    await done;
    expect(results).toBe(count);
    expect(last?.accepted && last.rune.seq).toBe(count + 1);
    await engine.close();
  });
});
