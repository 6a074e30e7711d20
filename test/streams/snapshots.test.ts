import { describe, expect, it } from 'vitest';
import { memoryStore, type RuneStore, type Snapshot } from '../../src/index.js';
import { Snapshots, type SnapshotSubject, type SnapshotsOptions } from '../../src/streams/snapshots.js';
import { runesOf } from '../../src/store-kit.js';

/** An instance as the engine keeps it, at its last durable rune. */
const subject = (stream: string, durableSeq = 0): SnapshotSubject => ({
  stream,
  machine: { id: 'counter', version: 1 },
  durableSeq,
  durableState: { n: durableSeq },
  sinceSnapshot: 0,
});

/** A durable rune of `s`: what the engine does before counting it. */
const durable = (s: SnapshotSubject & { durableSeq: number; durableState: unknown }, seq: number): SnapshotSubject => {
  s.durableSeq = seq;
  s.durableState = { n: seq };
  return s;
};

/** A memory store with `count` runes of each stream, whose snapshot saves can be held, recording what it is asked. */
async function storeWith(streams: readonly string[], count: number) {
  const inner = memoryStore();
  for (const stream of streams) await inner.append(runesOf(stream, 1, count));
  const calls: string[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  let gate: Promise<void> = Promise.resolve();
  const failing = new Set<string>();
  const store: RuneStore = {
    ...inner,
    saveSnapshot: async (snapshot: Snapshot) => {
      calls.push(`save ${snapshot.stream}@${snapshot.seq}`);
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      try {
        await gate;
        if (failing.has(snapshot.stream)) throw new Error(`no room for ${snapshot.stream}`);
        await inner.saveSnapshot(snapshot);
      } finally {
        inFlight--;
      }
    },
    prune: async (stream, throughSeq) => {
      calls.push(`prune ${stream}@${throughSeq}`);
      return inner.prune(stream, throughSeq);
    },
  };
  return {
    store,
    inner,
    calls,
    failing,
    maxInFlight: () => maxInFlight,
    hold: () => {
      let release!: () => void;
      gate = new Promise((r) => (release = r));
      return release;
    },
  };
}

const options = (overrides: Partial<SnapshotsOptions> = {}): SnapshotsOptions => ({ every: 3, retention: () => 'all', failed: () => {}, ...overrides });

describe('Snapshots: which fall due', () => {
  it('makes a snapshot of the durable state due every N durable runes, and none with every = 0', async () => {
    const { store } = await storeWith(['a'], 7);
    const snapshots = new Snapshots(store, options());
    const a = subject('a');
    for (let seq = 1; seq <= 2; seq++) snapshots.counted(durable(a, seq), true);
    expect(snapshots.due).toBe(false);
    snapshots.counted(durable(a, 3), true);
    expect(snapshots.due).toBe(true);
    await snapshots.saveSoon();
    expect(await store.latestSnapshot('a')).toEqual({ stream: 'a', seq: 3, state: { n: 3 } });

    const never = new Snapshots(store, options({ every: 0 }));
    for (let seq = 4; seq <= 7; seq++) never.counted(durable(a, seq), true);
    expect(never.due).toBe(false);
    expect(a.sinceSnapshot).toBe(0); // not even counted
  });

  it('counts the runes of an instance that is not the one in memory, and snapshots once it is', async () => {
    const { store } = await storeWith(['a'], 5);
    const snapshots = new Snapshots(store, options());
    const a = subject('a');
    for (let seq = 1; seq <= 4; seq++) snapshots.counted(durable(a, seq), false); // released meanwhile
    expect(snapshots.due).toBe(false);
    snapshots.counted(durable(a, 5), true);
    expect(snapshots.due).toBe(true);
    await snapshots.saveSoon();
    expect((await store.latestSnapshot('a'))?.seq).toBe(5);
  });
});

describe('Snapshots: saving in the background', () => {
  it('saves one snapshot at a time, in the order they fell due, including those due while saving', async () => {
    const recorder = await storeWith(['a', 'b'], 9);
    const snapshots = new Snapshots(recorder.store, options({ every: 1 }));
    const a = subject('a');
    const b = subject('b');
    const release = recorder.hold();
    snapshots.counted(durable(a, 1), true);
    snapshots.counted(durable(b, 1), true);
    const saving = snapshots.saveSoon();
    expect(snapshots.saveSoon()).toBe(saving); // one drain at a time
    expect(snapshots.saving).toBe(saving);
    snapshots.counted(durable(a, 2), true); // due while the first ones are being saved
    expect(snapshots.saveSoon()).toBe(saving); // joins the drain under way, rather than starting a second one
    release();
    await saving;
    expect(recorder.calls).toEqual(['save a@1', 'save b@1', 'save a@2']);
    expect(recorder.maxInFlight()).toBe(1);
    expect(snapshots.saving).toBeUndefined();
    expect((await recorder.inner.latestSnapshot('a'))?.seq).toBe(2);
  });

  it('prunes what a snapshot covers, right after saving it, for streams whose retention says so', async () => {
    const recorder = await storeWith(['tmp', 'keep'], 4);
    const snapshots = new Snapshots(recorder.store, options({ every: 2, retention: (stream, machine) => (stream === 'tmp' && machine === 'counter' ? 'snapshot' : 'all') }));
    for (const name of ['tmp', 'keep']) {
      const s = subject(name);
      for (let seq = 1; seq <= 4; seq++) snapshots.counted(durable(s, seq), true);
    }
    await snapshots.saveSoon();
    expect(recorder.calls).toEqual(['save tmp@2', 'prune tmp@2', 'save tmp@4', 'prune tmp@4', 'save keep@2', 'save keep@4']);
    expect(await recorder.inner.read('tmp')).toEqual([]);
    expect(await recorder.inner.read('keep')).toHaveLength(4);
  });

  it('reports a save that failed and goes on with the next; its stream keeps its runes', async () => {
    const recorder = await storeWith(['a', 'b'], 2);
    const failures: string[] = [];
    const snapshots = new Snapshots(
      recorder.store,
      options({ every: 2, retention: () => 'snapshot', failed: (stream, error) => failures.push(`${stream}: ${(error as Error).message}`) }),
    );
    recorder.failing.add('a');
    for (const name of ['a', 'b']) {
      const s = subject(name);
      for (let seq = 1; seq <= 2; seq++) snapshots.counted(durable(s, seq), true);
    }
    await snapshots.saveSoon();
    expect(failures).toEqual(['a: no room for a']);
    expect(recorder.calls).toEqual(['save a@2', 'save b@2', 'prune b@2']); // a's runes are not pruned
    expect(await recorder.inner.read('a')).toHaveLength(2);
    expect((await recorder.inner.latestSnapshot('b'))?.seq).toBe(2);
  });

  it('resolves at once when nothing is due', async () => {
    const { store } = await storeWith([], 0);
    const snapshots = new Snapshots(store, options());
    await expect(snapshots.saveSoon()).resolves.toBeUndefined();
    expect(snapshots.saving).toBeUndefined();
  });
});
