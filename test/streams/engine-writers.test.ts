import fc from 'fast-check';
import { firstValueFrom, take, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { chatActor, type ChatActorState, type DispatchResult, type Rune } from '../../src/index.js';
import { createEngine, memoryStore, StoreFencedError, type Engine, type RuneStore } from '../../src/index.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const interact = { type: 'ProcessInteraction', userId } as const;
const complete = { type: 'InteractionComplete', success: true } as const;

/** A store shared by several engines: closing one engine must not close it for the others. */
const shared = (store: RuneStore, options: { batches?: boolean } = {}): RuneStore => ({
  ...store,
  ...(options.batches ? { appendSync: undefined } : {}), // this engine's runes go in batches
  close: async () => {},
});

const fold = (runes: readonly Rune[]) => runes.slice(1).reduce((s, r) => chatActor.transition(s, r.event as never), chatActor.initial());

describe('two engines on one store (two writers), following it', () => {
  it("each one's state$ and runes$ carry the other's runes, and dispatches to one stream interleave without gap", async () => {
    const store = memoryStore();
    const a = createEngine({ store: shared(store), followStore: true });
    const b = createEngine({ store: shared(store), followStore: true });
    await a.spawn('s', chatActor);
    const statesOfA: string[] = [];
    a.state$<ChatActorState>('s').subscribe((state) => statesOfA.push(state.value));
    const runesOfA = firstValueFrom(a.runes$('s').pipe(take(4), toArray()));
    expect(await b.dispatch('s', interact)).toMatchObject({ accepted: true, rune: { seq: 2, from: 'idle', to: 'running' } });
    expect(await a.dispatch('s', complete)).toMatchObject({ accepted: true, rune: { seq: 3, from: 'running', to: 'idle' } });
    expect(await b.dispatch('s', { type: 'Pause', reason: 'lunch' })).toMatchObject({ accepted: true, rune: { seq: 4, from: 'idle', to: 'paused' } });
    expect(statesOfA).toEqual(['idle', 'running', 'idle', 'paused']);
    expect((await runesOfA).map((r) => r.seq)).toEqual([1, 2, 3, 4]);
    expect(await b.snapshot('s')).toEqual(await a.snapshot('s'));
    await a.close();
    await b.close();
  });

  // Before issue 15 part 2 the losing dispatch failed with the StoreConflictError; now it is applied again.
  for (const batches of [false, true]) {
    it(`an engine that does not follow meets the other writer as a lost seq race: it publishes the runes it missed, then applies its event to the newer state (${batches ? 'in batches' : 'at once'})`, async () => {
      const store = memoryStore();
      const a = createEngine({ store: shared(store, { batches }) });
      const b = createEngine({ store: shared(store), followStore: true });
      await a.spawn('s', chatActor);
      const seen: string[] = [];
      a.runes$('s').subscribe((rune) => seen.push(`${rune.seq} ${rune.kind}`));
      const states: string[] = [];
      a.state$<ChatActorState>('s').subscribe((state) => states.push(state.value));
      await firstValueFrom(a.runes$('s'));
      await b.dispatch('s', interact); // a hears nothing of it
      // Applied to the state a knew, idle, then again to the one b left: running.
      expect(await a.dispatch('s', { type: 'Pause' })).toMatchObject({ accepted: true, rune: { seq: 3, from: 'running', to: 'paused' } });
      expect(seen).toEqual(['1 spawned', '2 ProcessInteraction', '3 Pause']);
      expect(states).toEqual(['idle', 'running', 'paused']);
      expect((await b.snapshot('s'))?.seq).toBe(3); // b follows: it has a's rune
      await a.close();
      await b.close();
    });
  }

  it("rejects a losing dispatch with the machine's reason when the newer state refuses its event", async () => {
    const store = memoryStore();
    const a = createEngine({ store: shared(store, { batches: true }), followStore: true });
    const b = createEngine({ store: shared(store), followStore: true });
    await a.spawn('s', chatActor);
    const mine = a.dispatch('s', { type: 'Pause', reason: 'lunch' }); // waits for its batch
    expect(await b.dispatch('s', { type: 'Cancel', reason: 'user' })).toMatchObject({ accepted: true, rune: { seq: 2, to: 'cancelled' } });
    expect(await mine).toMatchObject({ accepted: false, code: 'terminal_state' });
    expect((await store.read('s')).map((r) => r.kind)).toEqual(['spawned', 'Cancel']);
    await a.close();
    await b.close();
  });

  for (const batches of [false, true]) {
    it(`rejects a spawn that loses as stream_exists, and applies the dispatch queued behind it to the winner's stream (${batches ? 'in batches' : 'at once'})`, async () => {
      const store = memoryStore();
      const a = createEngine({ store: shared(store, { batches }), followStore: true });
      const b = createEngine({ store: shared(store), followStore: true });
      // Both ask the store whether the stream exists before either spawn is committed; b's is first.
      const spawns = [b.spawn('s', chatActor), a.spawn('s', chatActor)];
      const after = a.dispatch('s', interact); // waits for a's spawn
      const outcomes = await Promise.all(spawns);
      expect(outcomes.filter((o) => o.accepted)).toMatchObject([{ rune: { seq: 1 } }]);
      expect(outcomes.filter((o) => !o.accepted)).toEqual([{ accepted: false, code: 'stream_exists', reason: 'stream "s" already exists' }]);
      expect(await after).toMatchObject({ accepted: true, rune: { seq: 2, from: 'idle', to: 'running' } });
      expect(a.machineOf('s')).toBe('chat-actor'); // the winner's stream, in a's memory
      expect((await store.read('s')).map((r) => r.kind)).toEqual(['spawned', 'ProcessInteraction']);
      for (const engine of [a, b]) expect((await engine.snapshot('s'))?.seq).toBe(2);
      await a.close();
      await b.close();
    });
  }

  it('rejects a dispatch that loses maxRaceLosses times in a row with contention, naming the stream', async () => {
    const store = memoryStore();
    const a = createEngine({ store: shared(store), maxRaceLosses: 1 });
    const b = createEngine({ store: shared(store), followStore: true });
    await a.spawn('s', chatActor);
    await b.dispatch('s', { type: 'Ping' });
    expect(await a.dispatch('s', { type: 'Ping' })).toEqual({
      accepted: false,
      code: 'contention',
      reason: 'stream "s": another writer took its next seq 1 times in a row; nothing was appended',
    });
    expect(await a.dispatch('s', { type: 'Ping' })).toMatchObject({ accepted: true, rune: { seq: 3 } }); // a caught up meanwhile
    expect(() => createEngine({ maxRaceLosses: 0 })).toThrow('createEngine: "maxRaceLosses" must be a positive integer, got 0');
    await a.close();
    await b.close();
  });

  it("holds the other writer's rune behind this engine's runes on their way: told once they lost the race, in seq order, before they are applied again", async () => {
    const store = memoryStore();
    const a = createEngine({ store: shared(store, { batches: true }), followStore: true });
    const b = createEngine({ store: shared(store), followStore: true });
    await a.spawn('s', chatActor);
    const seen: string[] = [];
    a.runes$('s').subscribe((rune) => seen.push(`${rune.seq} ${rune.kind}`));
    const states: string[] = [];
    a.state$<ChatActorState>('s').subscribe((state) => states.push(state.value));
    await firstValueFrom(a.runes$('s'));
    const mine = a.dispatch('s', interact); // waits for its batch
    expect(await b.dispatch('s', { type: 'Pause', reason: 'lunch' })).toMatchObject({ accepted: true, rune: { seq: 2 } }); // b is first
    expect(seen).toEqual(['1 spawned']); // b's rune waits behind a's
    // a's event lost seq 2: applied again to the paused state b left, it takes seq 3.
    expect(await mine).toMatchObject({ accepted: true, rune: { seq: 3, from: 'paused', to: 'idle' } });
    expect(seen).toEqual(['1 spawned', '2 Pause', '3 ProcessInteraction']);
    expect(states).toEqual(['idle', 'paused', 'idle']);
    await a.close();
    await b.close();
  });

  it('tells state$ subscribers of a stream that left memory the state the other writer left it in', async () => {
    const store = memoryStore();
    const a = createEngine({ store: shared(store), followStore: true });
    const b = createEngine({ store: shared(store), followStore: true });
    await a.spawn('s', chatActor);
    const states: string[] = [];
    a.state$<ChatActorState>('s').subscribe((state) => states.push(state.value));
    a.release('s');
    expect(a.size).toBe(0);
    const runes: number[] = [];
    a.runes$('s', { afterSeq: 1 }).subscribe((rune) => runes.push(rune.seq));
    await b.dispatch('s', interact);
    await new Promise((resolve) => setImmediate(resolve));
    expect(states).toEqual(['idle', 'running']);
    expect(a.size).toBe(1); // loaded to tell its state
    // Runes that come while it loads are folded into that load: state$ may skip what they passed
    // through (as a late subscriber would); runes$ carries every one.
    a.release('s');
    await b.dispatch('s', complete);
    await b.dispatch('s', { type: 'Pause' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(states.at(-1)).toBe('paused');
    expect(runes).toEqual([2, 3, 4]);
    await a.close();
    await b.close();
  });

  it('refuses followStore on a store without tail, and a malformed fence, the ws way', async () => {
    const { tail: _tail, ...withoutTail } = memoryStore();
    expect(() => createEngine({ store: withoutTail, followStore: true })).toThrow('createEngine: "followStore" needs a store with tail');
    expect(() => createEngine({ fence: { lease: '', epoch: 1 } })).toThrow(
      'createEngine: "fence" must be { lease: a non-empty string, epoch: a non-negative integer } or a function of the stream',
    );
    expect(() => createEngine({ fence: { lease: 'log', epoch: 1.5 } })).toThrow(TypeError);
    expect(() => createEngine({ fence: 'log' as never })).toThrow(TypeError);
    await createEngine({ fence: () => undefined }).close(); // a lease manager's fenceOf: taken as it is
  });
});

describe('fencing: an owner that lost its lease cannot write', () => {
  for (const batches of [false, true]) {
    it(`fails every dispatch of the old owner once the new one raised the lease, and writes nothing of them (${batches ? 'in batches' : 'at once'})`, async () => {
      const store = memoryStore();
      const old = createEngine({ store: shared(store, { batches }), fence: { lease: 'log', epoch: 1 } });
      await old.spawn('s', chatActor);
      // The lease moves on while the old owner is paused; the new owner raises it before writing.
      await store.raiseFence!({ lease: 'log', epoch: 2 });
      const owner = createEngine({ store: shared(store), fence: { lease: 'log', epoch: 2 } });
      const fenced = await old.dispatch('s', interact).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(fenced).toBeInstanceOf(StoreFencedError);
      expect(fenced).toMatchObject({ code: 'fenced', fence: { lease: 'log', epoch: 1 }, newestEpoch: 2 });
      expect(await old.spawn('t', chatActor).catch((error: unknown) => error)).toBeInstanceOf(StoreFencedError);
      expect(await owner.dispatch('s', interact)).toMatchObject({ accepted: true, rune: { seq: 2 } });
      expect((await store.read('s')).map((r) => r.kind)).toEqual(['spawned', 'ProcessInteraction']);
      expect(await store.head('t')).toBeUndefined();
      await old.close();
      await owner.close();
    });
  }
});

describe('fences per stream: the fence function of a lease manager', () => {
  const fenceOf = (stream: string) => (stream.startsWith('old/') ? { lease: 'shard-1', epoch: 1 } : { lease: 'shard-2', epoch: 1 });

  for (const batches of [false, true]) {
    it(`fails the dispatches of the streams under a lease lost, while another stream's dispatch of the same batch is accepted (${batches ? 'in batches' : 'at once'})`, async () => {
      const store = memoryStore();
      const engine = createEngine({ store: shared(store, { batches }), fence: fenceOf });
      await engine.spawn('old/s', chatActor);
      await engine.spawn('t', chatActor);
      await store.raiseFence!({ lease: 'shard-1', epoch: 2 }); // shard-1 moved to another owner
      const [fenced, accepted] = await Promise.allSettled([engine.dispatch('old/s', interact), engine.dispatch('t', interact)]);
      expect(fenced).toMatchObject({ status: 'rejected', reason: { name: 'StoreFencedError', code: 'fenced', fence: { lease: 'shard-1', epoch: 1 }, newestEpoch: 2 } });
      expect(accepted).toMatchObject({ status: 'fulfilled', value: { accepted: true, rune: { stream: 't', seq: 2 } } });
      expect(engine.machineOf('old/s')).toBeUndefined(); // its instance left memory
      expect((await store.read('old/s')).map((r) => r.seq)).toEqual([1]);
      await engine.close();
    });
  }
});

const EVENTS = [{ type: 'Ping' }, { type: 'Ping' }, interact, complete, { type: 'Pause', reason: 'lunch' }, { type: 'Cancel', reason: 'user' }, { type: 'Explode' }];
const STREAMS = ['s', 't'] as const;

type Command =
  | { op: 'dispatch'; engine: number; stream: number; event: number }
  /** Dispatch `event` from inside engine's runes$() subscriber, to the stream of the next rune it hears. */
  | { op: 'answer'; engine: number; event: number }
  | { op: 'release'; engine: number; stream: number }
  | { op: 'turn' };

const engineIndex = fc.nat({ max: 2 }); // taken modulo the number of engines
const streamIndex = fc.nat({ max: STREAMS.length - 1 });
const eventIndex = fc.nat({ max: EVENTS.length - 1 });
const command: fc.Arbitrary<Command> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('dispatch' as const), engine: engineIndex, stream: streamIndex, event: eventIndex }), weight: 8 },
  { arbitrary: fc.record({ op: fc.constant('answer' as const), engine: engineIndex, event: eventIndex }), weight: 3 },
  { arbitrary: fc.record({ op: fc.constant('release' as const), engine: engineIndex, stream: streamIndex }), weight: 1 },
  { arbitrary: fc.constant({ op: 'turn' as const }), weight: 2 },
);

const turn = () => new Promise((resolve) => setImmediate(resolve));

/** The codes a dispatch of EVENTS may be refused with by chatActor. */
const MACHINE_CODES = ['not_allowed', 'terminal_state', 'unknown_event'];

/**
 * Engines following one memory store drive a few streams at once, without awaiting (as busy
 * servers would); `batches` says, per engine, whether it appends in batches rather than at once.
 */
async function check(batches: readonly boolean[], commands: readonly Command[]): Promise<void> {
  const store = memoryStore();
  // A bound no run reaches: each loss needs another writer's rune, and a run makes far fewer.
  const engines: Engine[] = batches.map((b) => createEngine({ store: shared(store, { batches: b }), followStore: true, snapshotEvery: 3, maxRaceLosses: 1000 }));
  for (const stream of STREAMS) await engines[0]!.spawn(stream, chatActor);
  const n = engines.length;
  const lastStates = engines.map(() => new Map<string, unknown>());
  const seqs = engines.map(() => new Map<string, number[]>(STREAMS.map((stream) => [stream, []])));
  const allSeqs = engines.map(() => new Map<string, number[]>(STREAMS.map((stream) => [stream, []])));
  const streamErrors: unknown[] = [];
  const answers: number[][] = engines.map(() => []);
  const outcomes: Array<Promise<DispatchResult | { failed: unknown }>> = [];
  const dispatch = (i: number, stream: string, event: number) => outcomes.push(engines[i]!.dispatch(stream, EVENTS[event]).catch((failed: unknown) => ({ failed })));
  engines.forEach((engine, i) => {
    for (const stream of STREAMS) {
      engine.state$(stream).subscribe({ next: (state) => lastStates[i]!.set(stream, state), error: (e) => streamErrors.push(e) });
      engine.runes$(stream).subscribe({ next: (rune) => seqs[i]!.get(stream)!.push(rune.seq), error: (e) => streamErrors.push(e) });
    }
    engine.runes$().subscribe((rune) => {
      allSeqs[i]!.get(rune.stream)!.push(rune.seq);
      const answer = answers[i]!.shift();
      if (answer !== undefined) dispatch(i, rune.stream, answer);
    });
  });
  for (const c of commands) {
    if (c.op === 'dispatch') dispatch(c.engine % n, STREAMS[c.stream]!, c.event);
    else if (c.op === 'answer') answers[c.engine % n]!.push(c.event);
    else if (c.op === 'release') engines[c.engine % n]!.release(STREAMS[c.stream]!);
    else await turn();
  }
  for (let settled = 0; settled < outcomes.length; ) {
    const upTo = outcomes.length;
    await Promise.all(outcomes.slice(settled, upTo));
    settled = upTo;
    await turn();
  }
  const results = await Promise.all(outcomes);
  await turn(); // subscriptions that had to load a stream

  // Every dispatch was accepted or refused by the machine: none failed, none lost for good.
  for (const result of results) {
    expect(result).not.toHaveProperty('failed');
    if ('accepted' in result && !result.accepted) expect(MACHINE_CODES).toContain(result.code);
  }
  const accepted = results.flatMap((r) => ('accepted' in r && r.accepted ? [r.rune] : []));
  expect(streamErrors).toEqual([]);
  for (const stream of STREAMS) {
    const log = await store.read(stream);
    const seqsOfLog = log.map((r) => r.seq);
    expect(seqsOfLog).toEqual(log.map((_, i) => i + 1)); // gapless
    // Each stored rune after the spawn was accepted exactly once, by one of the engines.
    const mine = accepted.filter((r) => r.stream === stream);
    expect(mine.map((r) => r.seq).sort((x, y) => x - y)).toEqual(seqsOfLog.slice(1));
    for (const rune of mine) expect(rune).toEqual(log[rune.seq - 1]);
    // Every engine saw every rune once, in order, and its state is the fold of the log.
    for (let i = 0; i < n; i++) {
      expect(seqs[i]!.get(stream)).toEqual(seqsOfLog);
      expect(allSeqs[i]!.get(stream)).toEqual(seqsOfLog.slice(1)); // subscribed after the spawns
      expect(lastStates[i]!.get(stream)).toEqual(fold(log));
      expect(await engines[i]!.snapshot(stream)).toEqual({ stream, seq: log.length, state: fold(log) });
    }
  }
  for (const engine of engines) await engine.close();
}

describe('engines following one store: random dispatches to a few streams from each, answers from inside subscribers, releases and turns', () => {
  // Found by the property below: an engine that lost a seq race is released while it catches up;
  // the other writer's runes it then hears must reach its state$ through a fresh load.
  it('tells state$ the newer state of a stream released while it catches up after a lost seq race', async () => {
    await check(
      [true, true],
      [
        { op: 'dispatch', engine: 1, stream: 1, event: 0 },
        { op: 'dispatch', engine: 0, stream: 1, event: 0 },
        { op: 'dispatch', engine: 0, stream: 1, event: 5 },
        { op: 'turn' },
        { op: 'release', engine: 1, stream: 1 },
      ],
    );
  });

  const commands = fc.array(command, { minLength: 1, maxLength: 40 });
  for (const batches of [
    [false, false],
    [true, false],
    [true, true],
    [true, false, false],
    [true, true, false],
    [true, true, true],
  ] as const) {
    it(`every dispatch accepted once or refused by the machine, never a conflict; gapless logs; every engine sees every rune once, in order, and folds the log (${batches.map((b) => (b ? 'batches' : 'at once')).join(' / ')})`, async () => {
      await fc.assert(
        fc.asyncProperty(commands, (cs) => check(batches, cs)),
        { numRuns: 100 },
      );
    });
  }
});
