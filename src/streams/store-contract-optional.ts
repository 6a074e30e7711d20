import type { Rune } from '../reducers/rune.js';
import { StoreConflictError, StoreError, StoreFencedError, type RuneStore } from './store.js';
import { runeOf, runesOf, type ContractTestApi, type StoreFeatures } from './store-contract-api.js';

/**
 * The cases of the store contract (see `storeContract`) for the optional methods a store claims:
 * `appendSync`, `restore`, and the several writers' `tail` and `raiseFence`.
 */
export function optionalMethodCases(makeStore: () => Promise<RuneStore> | RuneStore, test: ContractTestApi, features: StoreFeatures): void {
  const { it, expect } = test;
  if (features.appendSync) {
    it('appendSync commits one rune at once, with the same checks and errors as append, thrown', async () => {
      const store = await makeStore();
      store.appendSync!(runeOf('a', 1));
      store.appendSync!(runeOf('a', 2));
      expect(() => store.appendSync!(runeOf('a', 4))).toThrow(StoreConflictError);
      let thrown: unknown;
      try {
        store.appendSync!(runeOf('a', 2));
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toMatchObject({ code: 'seq_conflict', stream: 'a', expectedSeq: 3, gotSeq: 2 });
      expect(await store.read('a')).toEqual(runesOf('a', 1, 2));
      await store.close();
    });
  }

  if (features.restore) {
    it('restore: takes back pruned runes right below the oldest stored one, in one transaction, and keeps the head and snapshot', async () => {
      const store = await makeStore();
      await store.append(runesOf('a', 1, 2000));
      await store.saveSnapshot({ stream: 'a', seq: 1500, state: { n: 1500 } });
      expect(await store.prune('a', 1500)).toBe(1500);
      expect(await store.restore!(runesOf('a', 1001, 500))).toBe(500);
      expect((await store.read('a', 0, 1))[0]!.seq).toBe(1001);
      expect(await store.restore!(runesOf('a', 1, 1000))).toBe(1000);
      expect(await store.read('a')).toEqual(runesOf('a', 1, 2000));
      expect(await store.readEvents('a', 1998)).toEqual(runesOf('a', 1999, 2).map((rune) => rune.event));
      expect(await store.head('a')).toEqual({ stream: 'a', machine: 'counter', seq: 2000, value: 'idle', at: 20000 });
      expect(await store.latestSnapshot('a')).toEqual({ stream: 'a', seq: 1500, state: { n: 1500 } });
      await store.append([runeOf('a', 2001)]);
      expect((await store.read('a', 1999)).map((r) => r.seq)).toEqual([2000, 2001]);
      await store.close();
    });

    it('restore: a stream pruned through its head takes its runes back; appends continue after the head', async () => {
      const store = await makeStore();
      await store.append(runesOf('a', 1, 5));
      await store.saveSnapshot({ stream: 'a', seq: 5, state: { n: 5 } });
      await store.prune('a', 5);
      expect(await store.read('a')).toEqual([]);
      expect(await store.restore!(runesOf('a', 1, 5))).toBe(5);
      await store.append([runeOf('a', 6)]);
      expect(await store.read('a')).toEqual(runesOf('a', 1, 6));
      await store.close();
    });

    it('restore: refuses, writing nothing, runes that leave a gap, overlap, skip a seq, mix streams or machines, or name an unknown stream', async () => {
      const store = await makeStore();
      await store.append([...runesOf('a', 1, 10), ...runesOf('b', 1, 2)]);
      await store.saveSnapshot({ stream: 'a', seq: 6, state: { n: 6 } });
      await store.prune('a', 6);
      const refused: (readonly Rune[])[] = [
        runesOf('a', 1, 5), // a gap below 7
        runesOf('a', 2, 6), // overlaps 7
        [...runesOf('a', 1, 3), ...runesOf('a', 5, 2)], // skips 4
        [...runesOf('a', 1, 5), runeOf('b', 6)],
        runesOf('a', 1, 6).map((rune) => ({ ...rune, machine: 'other' })),
        runesOf('c', 1, 3),
      ];
      for (const runes of refused) await expect(store.restore!(runes), JSON.stringify(runes.map((r) => [r.stream, r.seq]))).rejects.toMatchObject({ code: 'invalid_restore' });
      expect(await store.read('a')).toEqual(runesOf('a', 7, 4));
      expect(await store.restore!([])).toBe(0);
      await store.close();
      await expect(store.restore!(runesOf('a', 1, 6))).rejects.toMatchObject({ code: 'closed' });
    });
  }

  if (features.severalWriters) {
    it('tail: tells each listener every rune any writer commits from then on, in commit order, with increasing positions and its writer', async () => {
      const store = await makeStore();
      await store.append(runesOf('a', 1, 2), { writer: 'w1' }); // before the listener: not told
      const heard: string[] = [];
      const positions: number[] = [];
      const stop = store.tail!((rune, position, writer) => {
        heard.push(`${writer ?? '-'} ${rune.stream}:${rune.seq}`);
        positions.push(position);
      });
      await store.append([runeOf('a', 3), runeOf('b', 1)], { writer: 'w1' });
      store.appendSync?.(runeOf('b', 2), { writer: 'w2' });
      if (store.appendSync === undefined) await store.append([runeOf('b', 2)], { writer: 'w2' });
      await store.append([runeOf('a', 9)], { writer: 'w2' }).catch(() => {}); // refused: never told
      await store.append([runeOf('a', 4)]); // no writer named
      expect(heard).toEqual(['w1 a:3', 'w1 b:1', 'w2 b:2', '- a:4']);
      expect(positions.every((p, i) => i === 0 || p > positions[i - 1]!)).toBe(true);
      expect(await store.read('a', 3)).toEqual([runeOf('a', 4)]); // what it heard is what is stored
      stop();
      await store.append([runeOf('a', 5)]);
      expect(heard).toHaveLength(4);
      await store.close();
    });

    it('tail: keeps commit order for every listener when a listener appends from inside its call', async () => {
      const store = await makeStore();
      const first: string[] = [];
      const second: string[] = [];
      store.tail!((rune) => {
        first.push(`${rune.stream}:${rune.seq}`);
        if (rune.stream === 'a' && rune.seq === 1) void store.append([runeOf('echo', 1)]); // answers a:1 at once
      });
      store.tail!((rune) => second.push(`${rune.stream}:${rune.seq}`));
      await store.append([runeOf('a', 1), runeOf('a', 2)]);
      await store.append([runeOf('a', 3)]);
      const order = ['a:1', 'a:2', 'echo:1', 'a:3'];
      expect(second).toEqual(order);
      expect(first).toEqual(order);
      await store.close();
    });

    it('fences: after raiseFence, an append with an older epoch of the lease is refused whole; newer and equal epochs pass', async () => {
      const store = await makeStore();
      const old = { lease: 'log', epoch: 1 };
      await store.append(runesOf('a', 1, 2), { fences: [old] });
      await store.raiseFence!({ lease: 'log', epoch: 2 }); // a new owner took the lease
      const refused = await store.append([runeOf('a', 3), runeOf('b', 1)], { fences: [old] }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(StoreFencedError);
      expect(refused).toBeInstanceOf(StoreError);
      expect(refused).toMatchObject({
        name: 'StoreFencedError',
        code: 'fenced',
        fence: old,
        newestEpoch: 2,
        message: 'lease "log": epoch 1 is fenced off by epoch 2; nothing of the batch was written',
      });
      if (store.appendSync !== undefined) expect(() => store.appendSync!(runeOf('a', 3), { fences: [old] })).toThrow(StoreFencedError);
      expect(await store.read('a')).toEqual(runesOf('a', 1, 2));
      expect(await store.head('b')).toBeUndefined();

      await store.append([runeOf('a', 3)], { fences: [{ lease: 'log', epoch: 2 }] });
      await store.append([runeOf('a', 4)], { fences: [{ lease: 'log', epoch: 3 }] }); // a newer one raises it
      await expect(store.append([runeOf('a', 5)], { fences: [{ lease: 'log', epoch: 2 }] })).rejects.toMatchObject({ code: 'fenced', newestEpoch: 3 });
      await store.raiseFence!({ lease: 'log', epoch: 1 }); // lower: ignored
      await expect(store.append([runeOf('a', 5)], { fences: [{ lease: 'log', epoch: 2 }] })).rejects.toMatchObject({ code: 'fenced', newestEpoch: 3 });
      await store.close();
    });

    it('fences each lease on its own, and leaves an append without a fence unchecked', async () => {
      const store = await makeStore();
      await store.raiseFence!({ lease: 'shard-1', epoch: 5 });
      await store.append(runesOf('a', 1, 1), { fences: [{ lease: 'shard-2', epoch: 1 }] });
      await store.append(runesOf('a', 2, 1));
      await expect(store.append(runesOf('a', 3, 1), { fences: [{ lease: 'shard-1', epoch: 4 }] })).rejects.toMatchObject({ code: 'fenced' });
      // A batch under two leases: one stale fence refuses all of it.
      await expect(
        store.append([runeOf('a', 3), runeOf('b', 1)], {
          fences: [
            { lease: 'shard-2', epoch: 1 },
            { lease: 'shard-1', epoch: 4 },
          ],
        }),
      ).rejects.toMatchObject({
        code: 'fenced',
        fence: { lease: 'shard-1', epoch: 4 },
        newestEpoch: 5,
      });
      expect(await store.head('b')).toBeUndefined();
      await store.append([runeOf('a', 3), runeOf('b', 1)], {
        fences: [
          { lease: 'shard-2', epoch: 1 },
          { lease: 'shard-1', epoch: 5 },
        ],
      });
      expect((await store.head('a'))?.seq).toBe(3);
      await store.close();
    });
  } else {
    it('has one writer by construction: an append with any fence is taken (its lock is the fence)', async () => {
      const store = await makeStore();
      await store.append(runesOf('a', 1, 2), { writer: 'w', fences: [{ lease: 'log', epoch: 7 }] });
      await store.append([runeOf('a', 3)], { writer: 'w', fences: [{ lease: 'log', epoch: 1 }] });
      expect((await store.head('a'))?.seq).toBe(3);
      await store.close();
    });
  }
}
