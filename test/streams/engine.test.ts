import { VirtualTimeScheduler, filter, firstValueFrom, lastValueFrom, map, take, tap, toArray, type Observable } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { chatActor, type ChatActorState, type Rune } from '../../src/index.js';
import { createEngine, type DispatchResult } from '../../src/streams/engine.js';
import { memoryStore } from '../../src/streams/memory-store.js';
import { StoreError, type RuneStore } from '../../src/streams/store.js';
import { heldStore } from '../support/held-store.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const interact = { type: 'ProcessInteraction', userId } as const;
const complete = { type: 'InteractionComplete', success: true } as const;

/** A store that records every append, and whose appends can be held back and released; engines of one test share it. */
const recordingStore = (inner?: RuneStore) => heldStore(inner, { keepOpen: true });

const settle = () => new Promise((r) => setImmediate(r));

describe('engine: spawn and dispatch', () => {
  it('spawns a stream with its first rune and applies events as runes with gapless seq', async () => {
    const engine = createEngine({ scheduler: new VirtualTimeScheduler() });
    const spawned = await engine.spawn('chat-1', 'chat-actor');
    expect(spawned).toEqual({
      accepted: true,
      rune: { stream: 'chat-1', seq: 1, machine: 'chat-actor', kind: 'spawned', event: { type: 'spawn' }, to: 'idle', at: 0, origin: { by: 'client' } },
    });
    const result = await engine.dispatch('chat-1', interact);
    expect(result).toEqual({
      accepted: true,
      rune: { stream: 'chat-1', seq: 2, machine: 'chat-actor', kind: 'ProcessInteraction', event: interact, from: 'idle', to: 'running', at: 0, origin: { by: 'client' } },
    });
    expect(await engine.dispatch('chat-1', complete)).toMatchObject({ accepted: true, rune: { seq: 3, to: 'idle' } });
    await engine.close();
  });

  it('spawns by machine as well as by id, validating the input', async () => {
    const engine = createEngine();
    expect(await engine.spawn('b1', 'circuit-breaker', { failureThreshold: 2, successThreshold: 1, openTimeoutMs: 10 })).toMatchObject({
      accepted: true,
      rune: { kind: 'spawned', event: { type: 'spawn', input: { failureThreshold: 2, successThreshold: 1, openTimeoutMs: 10 } } },
    });
    expect(await engine.spawn('b2', 'circuit-breaker', { failureThreshold: 0 })).toMatchObject({
      accepted: false,
      code: 'invalid_input',
    });
    expect(await engine.spawn('c1', chatActor)).toMatchObject({ accepted: true });
    await engine.close();
  });

  it('rejects with a reason and appends nothing: unknown stream, second spawn, schema miss, not allowed, unknown machine', async () => {
    const recorder = recordingStore();
    const engine = createEngine({ store: recorder.store });
    await engine.spawn('chat-1', 'chat-actor');
    const appendsBefore = recorder.appends.length;
    expect(await engine.dispatch('nobody', interact)).toEqual({ accepted: false, code: 'unknown_stream', reason: 'unknown stream "nobody"' });
    expect(await engine.spawn('chat-1', 'chat-actor')).toEqual({ accepted: false, code: 'stream_exists', reason: 'stream "chat-1" already exists' });
    expect(await engine.dispatch('chat-1', { type: 'ProcessInteraction', userId: 'nope' })).toEqual({
      accepted: false,
      code: 'invalid_event',
      reason: 'invalid "ProcessInteraction" event: userId: Invalid UUID',
    });
    expect(await engine.dispatch('chat-1', { type: 'Explode' })).toMatchObject({ accepted: false, code: 'unknown_event' });
    expect(await engine.dispatch('chat-1', 'not an event')).toMatchObject({ accepted: false, code: 'invalid_event' });
    expect(await engine.dispatch('chat-1', complete)).toEqual({
      accepted: false,
      code: 'not_allowed',
      reason: 'event "InteractionComplete" is not allowed in state "idle"',
    });
    expect(await engine.spawn('x', 'no-such-machine')).toMatchObject({ accepted: false, code: 'unknown_machine' });
    expect(recorder.appends.length).toBe(appendsBefore);
    expect(await recorder.inner.read('chat-1')).toHaveLength(1);
    await engine.close();
  });

  it('refuses, naming it, a dispatch to a stored stream whose machine this engine does not host', async () => {
    const store = memoryStore();
    await store.append([{ stream: 'x', seq: 1, machine: 'alien', kind: 'spawned', event: { type: 'spawn' }, at: 0 }]);
    const engine = createEngine({ store });
    expect(await engine.dispatch('x', { type: 'Ping' })).toEqual({
      accepted: false,
      code: 'unknown_machine',
      reason: 'stream "x" was spawned as machine "alien", which this engine does not host',
    });
    await engine.close();
  });

  it('refuses the second of two concurrent spawns of one stream', async () => {
    const engine = createEngine();
    const results = await Promise.all([engine.spawn('s', 'chat-actor'), engine.spawn('s', 'chat-actor')]);
    expect(results.map((r) => r.accepted).sort((a, b) => Number(a) - Number(b))).toEqual([false, true]);
    await engine.close();
  });

  it('puts a spawn first, whatever microtask a dispatch to the new stream arrives in', async () => {
    const engine = createEngine();
    const results: Array<Promise<unknown>> = [engine.spawn('s', 'chat-actor')];
    // Dispatches at every microtask delay from 0 to 20: some find the spawn pending, some done.
    for (let delay = 0; delay <= 20; delay++) {
      let p = Promise.resolve();
      for (let i = 0; i < delay; i++) p = p.then();
      results.push(p.then(() => engine.dispatch('s', { type: 'Ping' })));
    }
    const settled = (await Promise.all(results)) as Array<{ accepted: boolean; rune: { seq: number } }>;
    expect(settled.every((r) => r.accepted)).toBe(true);
    expect(settled[0]!.rune.seq).toBe(1);
    expect(new Set(settled.map((r) => r.rune.seq)).size).toBe(22);
    await engine.close();
  });

  it('refuses a terminal state\'s events with "terminal state"', async () => {
    const engine = createEngine();
    await engine.spawn('s', 'chat-actor');
    await engine.dispatch('s', { type: 'Cancel', reason: 'user' });
    expect(await engine.dispatch('s', { type: 'Ping' })).toEqual({ accepted: false, code: 'terminal_state', reason: 'terminal state' });
    await engine.close();
  });
});

describe('engine: durability first', () => {
  it('commits the dispatches of one tick in one append, and resolves none before it is durable', async () => {
    const recorder = recordingStore();
    const engine = createEngine({ store: recorder.store });
    await engine.spawn('a', 'chat-actor');
    await engine.spawn('b', 'chat-actor');
    const states: string[] = [];
    engine.state$<ChatActorState>('a').subscribe((s) => states.push(s.value));
    await settle();
    expect(states).toEqual(['idle']);

    const release = recorder.hold();
    let resolved = 0;
    const results = [engine.dispatch('a', interact), engine.dispatch('b', interact), engine.dispatch('a', complete)];
    for (const r of results) void r.then(() => resolved++);
    await settle();
    expect(resolved).toBe(0); // held in the store
    expect(states).toEqual(['idle']); // subscribers see durable states only
    release();
    await Promise.all(results);
    expect(recorder.appends.at(-1)!.map((r) => `${r.stream}:${r.seq}`)).toEqual(['a:2', 'b:2', 'a:3']);
    expect(states).toEqual(['idle', 'running', 'idle']);
    await engine.close();
  });

  it('lets timers run while a caller dispatches again whenever a dispatch resolves', async () => {
    // Batches wait a turn of the event loop, not a microtask: such a caller must not starve
    // timers, sockets and stdout (a busy server, an epic answering its own runes).
    const engine = createEngine();
    await engine.spawn('a', 'chat-actor');
    let fired = false;
    setTimeout(() => (fired = true), 0);
    let dispatched = 0;
    while (!fired && dispatched < 100_000) {
      await engine.dispatch('a', { type: 'Ping' });
      dispatched++;
    }
    expect(fired).toBe(true);
    await engine.close();
  });

  it('fails the dispatches of a batch the store refused, and rebuilds the stream from the store', async () => {
    const recorder = recordingStore();
    const engine = createEngine({ store: recorder.store });
    await engine.spawn('a', 'chat-actor');
    recorder.failNextAppend(new Error('disk full'));
    await expect(engine.dispatch('a', interact)).rejects.toThrow('disk full');
    // Nothing of it is durable, and the engine's idea of the stream is what the store holds.
    expect(await recorder.inner.read('a')).toHaveLength(1);
    expect(await engine.dispatch('a', interact)).toMatchObject({ accepted: true, rune: { seq: 2, from: 'idle', to: 'running' } });
    await engine.close();
  });

  // Before issue 15 part 2 the conflicting stream's dispatches failed with the conflict; now they are applied again.
  it("applies the conflicting stream's dispatches of a refused batch again to the newer state; the other streams' are appended again and accepted, and hear nothing of it", async () => {
    const recorder = recordingStore();
    const engine = createEngine({ store: recorder.store });
    await engine.spawn('a', 'chat-actor');
    await engine.spawn('b', 'chat-actor');
    // Another writer appends a's seq 2 behind the engine's back: the engine's a:2 now conflicts.
    await recorder.inner.append([{ stream: 'a', seq: 2, machine: 'chat-actor', kind: 'Ping', event: { type: 'Ping' }, from: 'idle', to: 'idle', at: 0 }]);

    const spawns = recorder.appends.length;
    const release = recorder.hold();
    const outcomes: string[] = [];
    const track = (name: string, result: Promise<DispatchResult>): Promise<void> =>
      result.then(
        (r) => void outcomes.push(r.accepted ? `${name} accepted ${r.rune.stream}:${r.rune.seq}` : `${name} refused ${r.code}`),
        (error: Error) => void outcomes.push(`${name} failed: ${error.message}`),
      );
    const inBatch = [track('a1', engine.dispatch('a', interact)), track('b1', engine.dispatch('b', interact)), track('a2', engine.dispatch('a', complete))];
    await settle(); // that batch is in the store's append, held
    const queued = [track('a3', engine.dispatch('a', { type: 'Ping' })), track('b2', engine.dispatch('b', complete))];
    release();
    await Promise.all([...inBatch, ...queued]);

    expect(outcomes.sort()).toEqual([
      'a1 accepted a:3', // after the other writer's a:2, folded first
      'a2 accepted a:4',
      'a3 accepted a:5', // queued behind a's runes that lost: it stays behind them
      'b1 accepted b:2',
      'b2 accepted b:3',
    ]);
    expect(recorder.appends.slice(spawns).map((batch) => batch.map((r) => `${r.stream}:${r.seq}`))).toEqual([
      ['a:2', 'b:2', 'a:3'], // refused for a
      ['b:2', 'b:3', 'a:3', 'a:4', 'a:5'], // b's runes again; a's applied again after its catch-up
    ]);
    expect((await recorder.inner.read('b')).map((r) => r.kind)).toEqual(['spawned', 'ProcessInteraction', 'InteractionComplete']);
    expect((await recorder.inner.read('a')).map((r) => r.kind)).toEqual(['spawned', 'Ping', 'ProcessInteraction', 'InteractionComplete', 'Ping']);
    await engine.close();
  });

  it("fails every dispatch of a batch the store failed as a whole (unavailable: it may have been committed), with the store's error", async () => {
    const recorder = recordingStore();
    const engine = createEngine({ store: recorder.store });
    await engine.spawn('a', 'chat-actor');
    await engine.spawn('b', 'chat-actor');
    const lost = new StoreError('unavailable', 'postgresStore: an append failed, the connection to PostgreSQL was lost');
    recorder.failNextAppend(lost);
    const spawns = recorder.appends.length;
    const results = await Promise.allSettled([engine.dispatch('a', interact), engine.dispatch('b', interact)]);
    expect(results).toEqual([
      { status: 'rejected', reason: lost },
      { status: 'rejected', reason: lost },
    ]);
    expect(recorder.appends.length - spawns).toBe(1); // not split nor retried: the store itself failed, and may have written it
    expect(await engine.dispatch('b', interact)).toMatchObject({ accepted: true, rune: { seq: 2 } });
    await engine.close();
  });
});

describe('engine: a store that commits at once (the memory store)', () => {
  it('publishes a dispatch before it returns, and its rune is in the store', async () => {
    const store = memoryStore();
    const engine = createEngine({ store });
    await engine.spawn('a', 'chat-actor');
    const states: string[] = [];
    engine.state$<ChatActorState>('a').subscribe((s) => states.push(s.value)); // in memory: the current state at once
    const result = engine.dispatch('a', interact);
    expect(states).toEqual(['idle', 'running']);
    expect((await store.head('a'))?.seq).toBe(2);
    expect(await result).toMatchObject({ accepted: true, rune: { seq: 2, to: 'running' } });
    await engine.close();
  });

  it('takes a dispatch made from inside a subscriber in the next batch: every subscriber sees every rune in seq order', async () => {
    const engine = createEngine();
    await engine.spawn('a', 'chat-actor');
    const first: number[] = [];
    const second: number[] = [];
    const answered: Promise<unknown>[] = [];
    engine.runes$('a', { afterSeq: 1 }).subscribe((rune) => {
      first.push(rune.seq);
      if (rune.kind === 'ProcessInteraction') answered.push(engine.dispatch('a', complete)); // answers from inside
    });
    engine.runes$('a', { afterSeq: 1 }).subscribe((rune) => second.push(rune.seq));
    await settle(); // both replays are done
    const dispatched = engine.dispatch('a', interact);
    const right = engine.dispatch('a', { type: 'Ping' }); // behind the answer still in its batch
    expect(first).toEqual([2]);
    await Promise.all([dispatched, right, ...answered]);
    expect(first).toEqual([2, 3, 4]);
    expect(second).toEqual([2, 3, 4]);
    expect((await lastValueFrom(engine.runes$('a').pipe(take(4), toArray()))).map((r) => r.kind)).toEqual(['spawned', 'ProcessInteraction', 'InteractionComplete', 'Ping']);
    await engine.close();
  });

  it('lets timers run while an epic answers its own runes forever', async () => {
    let stop = false;
    let rounds = 0;
    let fiftyRounds!: () => void;
    const goneRound = new Promise<void>((resolve) => (fiftyRounds = resolve));
    const pingPong = (runes$: Observable<Rune>) =>
      runes$.pipe(
        filter((rune) => rune.kind === 'Ping' && !stop),
        tap(() => ++rounds === 50 && fiftyRounds()),
        map((rune) => ({ stream: rune.stream, event: { type: 'Ping' } })),
      );
    const engine = createEngine({ epics: [pingPong] });
    await engine.spawn('a', 'chat-actor');
    await engine.dispatch('a', { type: 'Ping' });
    await goneRound;
    // Starved, this timer would never fire and the test would time out.
    await new Promise((resolve) => setTimeout(resolve, 0));
    stop = true;
    expect((await engine.snapshot('a'))!.seq).toBeGreaterThan(50);
    await engine.close();
  });

  it('fails a dispatch whose rune the store refused at once, and rebuilds the stream from the store', async () => {
    const inner = memoryStore();
    let refuse = false;
    const store: RuneStore = {
      ...inner,
      appendSync: (rune) => {
        if (refuse) throw new Error('out of memory');
        inner.appendSync!(rune);
      },
    };
    const engine = createEngine({ store });
    await engine.spawn('a', 'chat-actor');
    refuse = true;
    await expect(engine.dispatch('a', interact)).rejects.toThrow('out of memory');
    refuse = false;
    expect(await engine.dispatch('a', interact)).toMatchObject({ accepted: true, rune: { seq: 2, from: 'idle', to: 'running' } });
    await engine.close();
  });
});

describe('engine: hydration, snapshots and retention', () => {
  it('hydrates a stream that is not in memory, on dispatch and on subscription', async () => {
    const recorder = recordingStore();
    const first = createEngine({ store: recorder.store });
    await first.spawn('a', 'chat-actor');
    await first.dispatch('a', interact);
    await first.close();

    const second = createEngine({ store: recorder.store });
    expect(second.size).toBe(0);
    expect(await firstValueFrom(second.state$<ChatActorState>('a'))).toEqual({ value: 'running', userId });
    expect(await second.dispatch('a', complete)).toMatchObject({ accepted: true, rune: { seq: 3, from: 'running', to: 'idle' } });
    await second.close();
  });

  it('snapshot(stream) gives the durable state with its seq, hydrating it; runes after that seq continue it', async () => {
    const recorder = recordingStore();
    const first = createEngine({ store: recorder.store });
    const spawning = first.spawn('a', 'chat-actor');
    // Asked before the spawn is durable: waits for it rather than calling the stream unknown.
    expect(await first.snapshot('a')).toEqual({ stream: 'a', seq: 1, state: { value: 'idle' } });
    await spawning;
    await first.dispatch('a', interact);
    await first.close();

    const second = createEngine({ store: recorder.store });
    const snapshot = await second.snapshot<ChatActorState>('a');
    expect(snapshot).toEqual({ stream: 'a', seq: 2, state: { value: 'running', userId } });
    const next = firstValueFrom(second.runes$('a', { afterSeq: snapshot!.seq }));
    await second.dispatch('a', complete);
    expect(await next).toMatchObject({ seq: 3, from: 'running', to: 'idle' });
    expect(await second.snapshot('nope')).toBeUndefined();
    await second.close();
  });

  it('stamps a rune with the time of its dispatch, even when the stream had to be hydrated first; at never goes back', async () => {
    const scheduler = new VirtualTimeScheduler();
    const engine = createEngine({ scheduler });
    await engine.spawn('a', 'chat-actor');
    engine.release('a');
    scheduler.frame = 100;
    const dispatched = engine.dispatch('a', interact); // hydrates 'a' first
    scheduler.frame = 500; // time moves on while it loads
    expect(await dispatched).toMatchObject({ accepted: true, rune: { seq: 2, at: 100 } });
    scheduler.frame = 50; // a clock that went back
    expect(await engine.dispatch('a', complete)).toMatchObject({ accepted: true, rune: { seq: 3, at: 100 } });
    await engine.close();
  });

  it('releases an instance from memory; the next dispatch respawns it from the log', async () => {
    const engine = createEngine();
    await engine.spawn('a', 'chat-actor');
    await engine.dispatch('a', interact);
    engine.release('a');
    expect(engine.size).toBe(0);
    expect(await engine.dispatch('a', complete)).toMatchObject({ accepted: true, rune: { seq: 3, from: 'running', to: 'idle' } });
    expect(engine.size).toBe(1);
    await engine.close();
  });

  it('lets an instance that reaches a terminal state leave memory; its state is still served from the log', async () => {
    const engine = createEngine();
    await engine.spawn('a', 'chat-actor');
    await engine.spawn('b', 'chat-actor');
    await engine.dispatch('a', { type: 'Cancel', reason: 'user_cancelled' });
    expect(engine.size).toBe(1); // only b
    expect(await firstValueFrom(engine.state$('a'))).toEqual({ value: 'cancelled', reason: 'user_cancelled' });
    expect(await engine.dispatch('a', interact)).toMatchObject({ accepted: false, code: 'terminal_state' });
    await engine.close();
  });

  it('saves a snapshot every N runes and hydrates from it', async () => {
    const recorder = recordingStore();
    const engine = createEngine({ store: recorder.store, snapshotEvery: 3 });
    await engine.spawn('a', 'chat-actor');
    for (let i = 0; i < 3; i++) {
      await engine.dispatch('a', interact);
      await engine.dispatch('a', complete);
    }
    expect(await recorder.inner.latestSnapshot('a')).toEqual({ stream: 'a', seq: 6, state: { value: 'running', userId } });

    const reads: number[] = [];
    const spying: RuneStore = { ...recorder.store, readEvents: (stream, after, limit) => (reads.push(after ?? 0), recorder.inner.readEvents(stream, after, limit)) };
    const second = createEngine({ store: spying });
    expect(await firstValueFrom(second.state$<ChatActorState>('a'))).toEqual({ value: 'idle', userId });
    expect(reads[0]).toBe(6); // from the snapshot, not from seq 0
    await second.close();
  });

  it('prunes what a snapshot covers for streams whose retention says so, and keeps the head', async () => {
    const store = memoryStore();
    const engine = createEngine({ store, snapshotEvery: 2, retention: (stream) => (stream.startsWith('tmp-') ? 'snapshot' : 'all') });
    for (const s of ['tmp-1', 'keep-1']) {
      await engine.spawn(s, 'chat-actor');
      await engine.dispatch(s, interact);
      await engine.dispatch(s, complete);
    }
    expect((await store.read('tmp-1')).map((r) => r.seq)).toEqual([3]);
    expect((await store.read('keep-1')).map((r) => r.seq)).toEqual([1, 2, 3]);
    engine.release('tmp-1');
    expect(await engine.dispatch('tmp-1', interact)).toMatchObject({ accepted: true, rune: { seq: 4 } });
    await engine.close();
  });
});

describe('engine: runes$', () => {
  it('replays the stored runes after afterSeq, then the live ones, with no gap and no duplicate', async () => {
    const engine = createEngine();
    await engine.spawn('a', 'chat-actor');
    const total = 400;
    // Dispatches keep coming while the subscriber joins in the middle.
    const writer = (async () => {
      for (let i = 0; i < total; i++) await engine.dispatch('a', i % 2 === 0 ? interact : complete);
    })();
    // Join once seq 50 is durable: runes 6..50 come from the store while 51.. arrive live.
    await firstValueFrom(engine.runes$().pipe(filter((r) => r.seq >= 50)));
    const seen = firstValueFrom(engine.runes$('a', { afterSeq: 5 }).pipe(take(total + 1 - 5), toArray()));
    await writer;
    const seqs = (await seen).map((r) => r.seq);
    expect(seqs).toEqual(Array.from({ length: total + 1 - 5 }, (_, i) => 6 + i));
    await engine.close();
  });

  it('runes$() carries every live rune of every stream, from subscription on', async () => {
    const engine = createEngine();
    await engine.spawn('a', 'chat-actor');
    const all: string[] = [];
    engine.runes$().subscribe((r) => all.push(`${r.stream}:${r.kind}`));
    await engine.spawn('b', 'chat-actor');
    await engine.dispatch('a', interact);
    await engine.dispatch('b', { type: 'Pause' });
    expect(all).toEqual(['b:spawned', 'a:ProcessInteraction', 'b:Pause']);
    await engine.close();
  });

  it("a replay the engine closes under completes with what it read, not with the closed store's error", async () => {
    const inner = memoryStore();
    let reads = 0;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // The replay's second read (the one that finds no more runes) waits until the engine has closed its store.
    const store: RuneStore = { ...inner, read: async (...args) => (++reads === 2 ? held.then(() => inner.read(...args)) : inner.read(...args)) };
    const engine = createEngine({ store });
    await engine.spawn('a', 'chat-actor');
    await engine.dispatch('a', interact);
    const seen: number[] = [];
    const ended = new Promise<string>((resolve) =>
      engine.runes$('a').subscribe({ next: (rune) => seen.push(rune.seq), error: (error: Error) => resolve(`error: ${error.message}`), complete: () => resolve('complete') }),
    );
    await new Promise((resolve) => setImmediate(resolve));
    await engine.close();
    release();
    expect(await ended).toBe('complete');
    expect(seen).toEqual([1, 2]);
  });

  it('ends a runes$ subscribed once the engine has closed, with no error (the store it would replay from is closed)', async () => {
    const engine = createEngine();
    await engine.spawn('a', 'chat-actor');
    await engine.close();
    const ended = (source$: Observable<unknown>) =>
      new Promise<string>((resolve) => source$.subscribe({ error: (error: Error) => resolve(`error: ${error.message}`), complete: () => resolve('complete') }));
    expect(await ended(engine.runes$('a'))).toBe('complete');
    expect(await ended(engine.runes$('a', { afterSeq: 1 }))).toBe('complete');
    expect(await ended(engine.runes$())).toBe('complete');
  });

  it('errors a subscription to an unknown stream, and refuses everything once closed', async () => {
    const engine = createEngine();
    await expect(firstValueFrom(engine.state$('nobody'))).rejects.toThrow('unknown stream "nobody"');
    await engine.close();
    expect(await engine.dispatch('a', interact)).toMatchObject({ accepted: false, code: 'closed' });
    expect(await engine.spawn('a', 'chat-actor')).toMatchObject({ accepted: false, code: 'closed' });
  });
});

describe('engine: races found in review', () => {
  it('makes a dispatch sent right after a spawn wait for it, even while an earlier load of the stream finds nothing', async () => {
    const engine = createEngine();
    const early = engine.snapshot('s'); // a reader that came first: its load finds nothing
    const spawned = engine.spawn('s', 'chat-actor');
    const paused = engine.dispatch('s', { type: 'Pause', reason: 'right after the spawn' }); // as an epic emits [spawn, event]
    expect(await early).toBeUndefined();
    expect(await spawned).toMatchObject({ accepted: true, rune: { seq: 1 } });
    expect(await paused).toMatchObject({ accepted: true, rune: { seq: 2, to: 'paused' } });
    await engine.close();
  });

  it('spawns a stream that a dispatch or subscription asked for first', async () => {
    const engine = createEngine();
    const early = engine.dispatch('s', { type: 'Ping' }); // starts a load that finds nothing
    expect(await engine.spawn('s', 'chat-actor')).toMatchObject({ accepted: true, rune: { seq: 1 } });
    expect(await early).toMatchObject({ accepted: false, code: 'unknown_stream' });
    await engine.close();
  });

  it('snapshots a stream that is released between its runes', async () => {
    const store = memoryStore();
    const engine = createEngine({ store, snapshotEvery: 3 });
    await engine.spawn('s', 'chat-actor');
    for (let i = 0; i < 4; i++) {
      await engine.dispatch('s', { type: 'Ping' });
      engine.release('s'); // e.g. shut down after every session
    }
    expect((await store.latestSnapshot('s'))?.seq).toBe(3);
    await engine.close();
  });

  it('answers "closed" to a dispatch still loading when the engine closes, and shares one close', async () => {
    const inner = memoryStore();
    const seed = createEngine({ store: { ...inner, close: async () => {} } });
    await seed.spawn('s', 'chat-actor');
    await seed.close();
    const engine = createEngine({ store: inner });
    const dispatched = engine.dispatch('s', { type: 'Ping' }); // hydrating
    const first = engine.close();
    expect(engine.close()).toBe(first);
    expect(await dispatched).toEqual({ accepted: false, code: 'closed', reason: 'the engine is closed' });
    await first;
  });
});
