import fc from 'fast-check';
import { firstValueFrom, take, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { chatActor, type ChatActorState, type DispatchResult, type Rune } from '../../src/index.js';
import { createEngine, memoryStore, StoreConflictError, StoreFencedError, type Engine, type RuneStore } from '../../src/index.js';

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

  it('an engine that does not follow meets the other writer as a conflict, then folds its runes on the next dispatch', async () => {
    const store = memoryStore();
    const a = createEngine({ store: shared(store) });
    const b = createEngine({ store: shared(store), followStore: true });
    await a.spawn('s', chatActor);
    await b.dispatch('s', interact);
    const collided = await a.dispatch('s', { type: 'Ping' }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(collided).toBeInstanceOf(StoreConflictError);
    expect(collided).toMatchObject({ stream: 's', expectedSeq: 3, gotSeq: 2 });
    expect(await a.dispatch('s', complete)).toMatchObject({ accepted: true, rune: { seq: 3, from: 'running', to: 'idle' } });
    expect((await b.snapshot('s'))?.seq).toBe(3); // b follows: it has a's rune
    await a.close();
    await b.close();
  });

  it("holds the other writer's rune behind this engine's runes on their way: told once they are refused, in seq order", async () => {
    const store = memoryStore();
    const a = createEngine({ store: shared(store, { batches: true }), followStore: true });
    const b = createEngine({ store: shared(store), followStore: true });
    await a.spawn('s', chatActor);
    const seen: string[] = [];
    a.runes$('s').subscribe((rune) => seen.push(`${rune.seq} ${rune.kind}`));
    const states: string[] = [];
    a.state$<ChatActorState>('s').subscribe((state) => states.push(state.value));
    await firstValueFrom(a.runes$('s'));
    const mine = a.dispatch('s', interact).catch((error: unknown) => error); // waits for its batch
    expect(await b.dispatch('s', { type: 'Pause', reason: 'lunch' })).toMatchObject({ accepted: true, rune: { seq: 2 } }); // b is first
    expect(seen).toEqual(['1 spawned']); // b's rune waits behind a's
    expect(await mine).toMatchObject({ name: 'StoreConflictError', stream: 's', expectedSeq: 3, gotSeq: 2 });
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen).toEqual(['1 spawned', '2 Pause']);
    expect(states).toEqual(['idle', 'paused']);
    expect(await a.dispatch('s', interact)).toMatchObject({ accepted: true, rune: { seq: 3, from: 'paused', to: 'idle' } });
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

  it('refuses followStore on a store without tail, and a malformed fence, the ws way', () => {
    const { tail: _tail, ...withoutTail } = memoryStore();
    expect(() => createEngine({ store: withoutTail, followStore: true })).toThrow('createEngine: "followStore" needs a store with tail');
    expect(() => createEngine({ fence: { lease: '', epoch: 1 } })).toThrow('createEngine: "fence" must be { lease: a non-empty string, epoch: a non-negative integer }');
    expect(() => createEngine({ fence: { lease: 'log', epoch: 1.5 } })).toThrow(TypeError);
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

const EVENTS = [{ type: 'Ping' }, { type: 'Ping' }, interact, complete, { type: 'Pause', reason: 'lunch' }, { type: 'Cancel', reason: 'user' }, { type: 'Explode' }];

type Command =
  | { op: 'dispatch'; engine: number; event: number }
  /** Dispatch `event` from inside engine's runes$() subscriber, when the next rune of the stream comes. */
  | { op: 'answer'; engine: number; event: number }
  | { op: 'release'; engine: number }
  | { op: 'turn' };

const engineIndex = fc.constantFrom(0, 1);
const eventIndex = fc.nat({ max: EVENTS.length - 1 });
const command: fc.Arbitrary<Command> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('dispatch' as const), engine: engineIndex, event: eventIndex }), weight: 8 },
  { arbitrary: fc.record({ op: fc.constant('answer' as const), engine: engineIndex, event: eventIndex }), weight: 3 },
  { arbitrary: fc.record({ op: fc.constant('release' as const), engine: engineIndex }), weight: 1 },
  { arbitrary: fc.constant({ op: 'turn' as const }), weight: 2 },
);

const turn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Two engines following one memory store drive one stream at once, without awaiting (as two
 * busy servers would); `batches` says which of them append in batches rather than at once.
 */
async function check(batches: readonly [boolean, boolean], commands: readonly Command[]): Promise<void> {
  const store = memoryStore();
  const engines: Engine[] = batches.map((b) => createEngine({ store: shared(store, { batches: b }), followStore: true, snapshotEvery: 3 }));
  await engines[0]!.spawn('s', chatActor);
  const lastStates: unknown[] = [undefined, undefined];
  const seqs: number[][] = [[], []];
  const allSeqs: number[][] = [[], []];
  const streamErrors: unknown[] = [];
  const answers: number[][] = [[], []];
  const outcomes: Array<Promise<DispatchResult | { failed: unknown }>> = [];
  const dispatch = (i: number, event: number) => outcomes.push(engines[i]!.dispatch('s', EVENTS[event]).catch((failed: unknown) => ({ failed })));
  engines.forEach((engine, i) => {
    engine.state$('s').subscribe({ next: (state) => (lastStates[i] = state), error: (e) => streamErrors.push(e) });
    engine.runes$('s').subscribe({ next: (rune) => seqs[i]!.push(rune.seq), error: (e) => streamErrors.push(e) });
    engine.runes$().subscribe((rune) => {
      allSeqs[i]!.push(rune.seq);
      const answer = answers[i]!.shift();
      if (answer !== undefined) dispatch(i, answer);
    });
  });
  for (const c of commands) {
    if (c.op === 'dispatch') dispatch(c.engine, c.event);
    else if (c.op === 'answer') answers[c.engine]!.push(c.event);
    else if (c.op === 'release') engines[c.engine]!.release('s');
    else await turn();
  }
  for (let settled = 0; settled < outcomes.length; ) {
    const upTo = outcomes.length;
    await Promise.all(outcomes.slice(settled, upTo));
    settled = upTo;
    await turn();
  }
  const results = await Promise.all(outcomes);
  await turn(); // subscriptions that had to load the stream

  const log = await store.read('s');
  expect(log.map((r) => r.seq)).toEqual(log.map((_, i) => i + 1)); // gapless
  // Every dispatch was accepted, refused by the machine, or failed with the conflict: nothing else.
  for (const result of results) {
    if ('failed' in result) expect(result.failed).toBeInstanceOf(StoreConflictError);
    else if (!result.accepted) expect(['not_allowed', 'terminal_state', 'unknown_event']).toContain(result.code);
  }
  // Each stored rune after the spawn was accepted exactly once, by one of the engines.
  const accepted = results.flatMap((r) => ('accepted' in r && r.accepted ? [r.rune] : []));
  expect(accepted.map((r) => r.seq).sort((x, y) => x - y)).toEqual(log.slice(1).map((r) => r.seq));
  for (const rune of accepted) expect(rune).toEqual(log[rune.seq - 1]);
  // Both engines saw every rune once, in order, and their state is the fold of the log.
  expect(streamErrors).toEqual([]);
  for (let i = 0; i < 2; i++) {
    expect(seqs[i]).toEqual(log.map((r) => r.seq));
    expect(allSeqs[i]).toEqual(log.slice(1).map((r) => r.seq)); // subscribed after the spawn
    expect(lastStates[i]).toEqual(fold(log));
    expect(await engines[i]!.snapshot('s')).toEqual({ stream: 's', seq: log.length, state: fold(log) });
  }
  for (const engine of engines) await engine.close();
}

describe('two engines following one store: random dispatches from both, answers from inside subscribers, releases and turns', () => {
  const commands = fc.array(command, { minLength: 1, maxLength: 40 });
  for (const batches of [
    [false, false],
    [true, false],
    [true, true],
  ] as const) {
    it(`gapless log, each rune accepted once or the dispatch failed with the conflict, both engines see every rune (${batches.map((b) => (b ? 'batches' : 'at once')).join(' / ')})`, async () => {
      await fc.assert(
        fc.asyncProperty(commands, (cs) => check(batches, cs)),
        { numRuns: 120 },
      );
    });
  }
});
