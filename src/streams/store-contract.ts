import type { Rune } from '../reducers/rune.js';
import type { RuneOrigin } from '../reducers/rune-origin.js';
import { StoreConflictError, StoreError, type HeadsQuery, type RuneStore } from './store.js';
import { optionalMethodCases } from './store-contract-optional.js';
import { runeOf, runesOf, type ContractTestApi, type StoreFeatures } from './store-contract-api.js';

export { runeOf, runesOf, type ContractAssertion, type ContractPromiseAssertion, type ContractTestApi, type StoreFeatures } from './store-contract-api.js';

/**
 * The contract every {@link RuneStore} keeps, as a test suite: `makeStore` gives a fresh, empty store
 * for each case. The SQLite store runs it on a real file, the memory store in memory; a new store
 * starts by passing it.
 *
 * ## Example
 * ```ts no-run: a test file; test/streams/memory-store.test.ts runs this one
 * import { describe, expect, it } from 'vitest';
 * import { memoryStore } from 'runestream';
 * import { storeContract } from 'runestream/store-kit';
 *
 * storeContract('memoryStore', () => memoryStore(), { describe, it, expect }, { appendSync: true, severalWriters: true });
 * ```
 */
export function storeContract(name: string, makeStore: () => Promise<RuneStore> | RuneStore, test: ContractTestApi, features: StoreFeatures = {}): void {
  const { describe, it, expect } = test;
  describe(`${name}: the RuneStore contract`, () => {
    it(`has exactly the optional methods it claims: appendSync ${features.appendSync ? 'yes' : 'no'}, tail and raiseFence ${features.severalWriters ? 'yes' : 'no'}`, async () => {
      const store = await makeStore();
      expect(typeof store.appendSync).toBe(features.appendSync ? 'function' : 'undefined');
      expect(typeof store.tail).toBe(features.severalWriters ? 'function' : 'undefined');
      expect(typeof store.raiseFence).toBe(features.severalWriters ? 'function' : 'undefined');
      expect(typeof store.restore).toBe(features.restore ? 'function' : 'undefined');
      await store.close();
    });

    it('appends, then reads back exactly what was written, in seq order', async () => {
      const store = await makeStore();
      await store.append([...runesOf('a', 1, 3), ...runesOf('b', 1, 2)]);
      await store.append(runesOf('a', 4, 2));
      expect(await store.read('a')).toEqual(runesOf('a', 1, 5));
      expect(await store.read('b')).toEqual(runesOf('b', 1, 2));
      expect(await store.read('a', 3)).toEqual(runesOf('a', 4, 2));
      expect(await store.read('a', 1, 2)).toEqual(runesOf('a', 2, 2));
      expect(await store.read('nobody')).toEqual([]);
      await store.close();
    });

    it("keeps each rune's payload as written, and gives a rune without one none", async () => {
      const store = await makeStore();
      // Every third rune has a payload, nested and with unicode; the others none, not even the key.
      const runes = runesOf('a', 1, 40).map((rune, i) =>
        i % 3 === 1 ? { ...rune, payload: { callId: `c${i}`, status: 'success', output: { lines: ['é✓', i], done: true } } } : rune,
      );
      await store.append(runes.slice(0, 20));
      if (features.appendSync) for (const rune of runes.slice(20)) store.appendSync!(rune);
      else await store.append(runes.slice(20));
      const read = await store.read('a');
      expect(read).toEqual(runes);
      expect(read.filter((rune) => Object.hasOwn(rune, 'payload')).length).toBe(13);
      await store.saveSnapshot({ stream: 'a', seq: 10, state: {} });
      await store.prune('a', 10);
      expect(await store.read('a')).toEqual(runes.slice(10));
      await store.close();
    });

    it("keeps each rune's machine version as written, and gives a rune without one none (version 1)", async () => {
      const store = await makeStore();
      // A machine upgraded in the middle of a stream: its runes from seq 15 on say version 2.
      const runes = runesOf('a', 1, 30).map((rune) => (rune.seq >= 15 ? { ...rune, v: 2 } : rune));
      await store.append(runes.slice(0, 20));
      if (features.appendSync) for (const rune of runes.slice(20)) store.appendSync!(rune);
      else await store.append(runes.slice(20));
      const read = await store.read('a');
      expect(read).toEqual(runes);
      expect(read.filter((rune) => Object.hasOwn(rune, 'v')).length).toBe(16);
      expect(await store.readEvents('a')).toEqual(runes.map((rune) => rune.event));
      await store.close();
    });

    it("keeps each rune's origin as written, and gives a rune without one none (written before runes had origins)", async () => {
      const store = await makeStore();
      const origins: RuneOrigin[] = [{ by: 'client', identity: 'ada' }, { by: 'client' }, { by: 'epic', epic: 'agentTurns' }, { by: 'model', epic: 'agentModel' }];
      // The first 5 runes from before origins; then each of the kinds in turn.
      const runes = runesOf('a', 1, 24).map((rune) => (rune.seq <= 5 ? rune : { ...rune, origin: origins[rune.seq % origins.length]! }));
      await store.append(runes.slice(0, 12));
      if (features.appendSync) for (const rune of runes.slice(12)) store.appendSync!(rune);
      else await store.append(runes.slice(12));
      const read = await store.read('a');
      expect(read).toEqual(runes);
      expect(read.filter((rune) => Object.hasOwn(rune, 'origin')).length).toBe(19);
      await store.close();
    });

    it('reads the events alone, as hydration folds them: the same pages as read', async () => {
      const store = await makeStore();
      await store.append([...runesOf('a', 1, 3), ...runesOf('b', 1, 2)]);
      await store.append(runesOf('a', 4, 2));
      const eventsOf = (runes: readonly Rune[]) => runes.map((r) => r.event);
      expect(await store.readEvents('a')).toEqual(eventsOf(runesOf('a', 1, 5)));
      expect(await store.readEvents('a', 3)).toEqual(eventsOf(runesOf('a', 4, 2)));
      expect(await store.readEvents('a', 1, 2)).toEqual(eventsOf(runesOf('a', 2, 2)));
      expect(await store.readEvents('a', 5)).toEqual([]);
      expect(await store.readEvents('nobody')).toEqual([]);
      await store.close();
    });

    it("gives a short page only at a stream's end, from any seq and across a pruned cut", async () => {
      const store = await makeStore();
      await store.append(runesOf('a', 1, 30));
      await store.append(runesOf('b', 1, 3));
      await store.append(runesOf('a', 31, 20));
      // Pages of 7 from every starting point: each full until the last, which ends at seq 50.
      const pages = async (read: (after: number) => Promise<readonly unknown[]>, from: number): Promise<number[]> => {
        const sizes: number[] = [];
        for (let after = from; ; ) {
          const page = await read(after);
          sizes.push(page.length);
          if (page.length < 7) return sizes;
          after += page.length;
        }
      };
      for (const from of [0, 3, 43, 44, 50]) {
        const left = 50 - from;
        const expected = [...Array<number>(Math.floor(left / 7)).fill(7), left % 7];
        expect(await pages((after) => store.read('a', after, 7), from)).toEqual(expected);
        expect(await pages((after) => store.readEvents('a', after, 7), from)).toEqual(expected);
      }
      // Pruned through 12: a read from before the cut starts at 13, in full pages still.
      await store.saveSnapshot({ stream: 'a', seq: 12, state: {} });
      await store.prune('a', 12);
      const first = await store.read('a', 0, 7);
      expect(first.map((rune) => rune.seq)).toEqual([13, 14, 15, 16, 17, 18, 19]);
      expect((await store.read('a', 40, 7)).length).toBe(7);
      expect((await store.read('a', 47, 7)).length).toBe(3);
      await store.close();
    });

    it("remembers each stream's machine and last seq", async () => {
      const store = await makeStore();
      await store.append([runeOf('a', 1, 'chat-actor'), runeOf('a', 2, 'chat-actor')]);
      expect(await store.head('a')).toEqual({ stream: 'a', machine: 'chat-actor', seq: 2, value: 'idle', at: 20 });
      expect(await store.head('nobody')).toBeUndefined();
      await store.close();
    });

    it('refuses a batch that does not continue a stream without gap, and writes nothing of it', async () => {
      const store = await makeStore();
      await store.append(runesOf('a', 1, 2));
      const cases: Rune[][] = [
        [runeOf('a', 4)], // gap
        [runeOf('a', 2)], // seq taken: another writer got there first
        [runeOf('b', 2)], // a stream must start with its spawn
        [...runesOf('c', 1, 2), runeOf('a', 3), runeOf('a', 3)], // a duplicate inside one batch
        [runeOf('c', 1), runeOf('a', 5)], // good runes of another stream do not get through either
      ];
      for (const batch of cases) {
        const error = await store.append(batch).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(StoreConflictError);
        expect(error).toMatchObject({ code: 'seq_conflict' });
      }
      expect(await store.read('a')).toEqual(runesOf('a', 1, 2));
      expect(await store.head('c')).toBeUndefined();
      expect(await store.head('b')).toBeUndefined();
      await store.close();
    });

    it('names the stream and the seqs in a conflict', async () => {
      const store = await makeStore();
      await store.append(runesOf('a', 1, 2));
      await expect(store.append([runeOf('a', 7)])).rejects.toThrow('stream "a": expected seq 3, got 7; nothing of the batch was written');
      await store.close();
    });

    it('names in a conflict the first stream of the batch that does not continue, the seq it expected and the seq it got', async () => {
      const store = await makeStore();
      await store.append(runesOf('a', 1, 2));
      const cases: Array<[Rune[], { stream: string; expectedSeq: number; gotSeq: number }]> = [
        [[runeOf('a', 4)], { stream: 'a', expectedSeq: 3, gotSeq: 4 }],
        [[runeOf('a', 2)], { stream: 'a', expectedSeq: 3, gotSeq: 2 }],
        [[runeOf('b', 2)], { stream: 'b', expectedSeq: 1, gotSeq: 2 }],
        [[...runesOf('c', 1, 2), runeOf('a', 3), runeOf('a', 3)], { stream: 'a', expectedSeq: 4, gotSeq: 3 }],
        [[runeOf('c', 1), runeOf('a', 5), runeOf('b', 9)], { stream: 'a', expectedSeq: 3, gotSeq: 5 }],
      ];
      for (const [batch, named] of cases) {
        const error = await store.append(batch).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(StoreConflictError);
        expect(error).toMatchObject({ name: 'StoreConflictError', code: 'seq_conflict', ...named });
      }
      await store.close();
    });

    it('lets two writers that read the same head race: the first append wins, the other is refused whole and succeeds after the head it missed', async () => {
      const store = await makeStore();
      await store.append(runesOf('a', 1, 2));
      const head = (await store.head('a'))!.seq; // both writers read seq 2
      await store.append([runeOf('a', head + 1)]); // the first writer
      const refused = await store.append([runeOf('a', head + 1), runeOf('b', 1)]).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(refused).toMatchObject({ code: 'seq_conflict', stream: 'a', expectedSeq: 4, gotSeq: 3 });
      expect(await store.head('b')).toBeUndefined(); // nothing of the batch, not even its other stream
      const again = (await store.head('a'))!.seq;
      await store.append([runeOf('a', again + 1), runeOf('b', 1)]);
      expect((await store.read('a')).map((r) => r.seq)).toEqual([1, 2, 3, 4]);
      await store.close();
    });

    it('keeps the newest snapshot and prunes only what a snapshot covers', async () => {
      const store = await makeStore();
      await store.append(runesOf('a', 1, 10));
      expect(await store.latestSnapshot('a')).toBeUndefined();
      await store.saveSnapshot({ stream: 'a', seq: 4, state: { n: 4 } });
      await store.saveSnapshot({ stream: 'a', seq: 8, state: { n: 8, nested: { list: [1, 'two'] } } });
      await store.saveSnapshot({ stream: 'a', seq: 6, state: { n: 6 } }); // older: ignored
      expect(await store.latestSnapshot('a')).toEqual({ stream: 'a', seq: 8, state: { n: 8, nested: { list: [1, 'two'] } } });
      // The machine version that folded it, kept as given: none (version 1) above, 3 here.
      await store.saveSnapshot({ stream: 'a', seq: 9, state: { n: 9 }, v: 3 });
      expect(await store.latestSnapshot('a')).toEqual({ stream: 'a', seq: 9, state: { n: 9 }, v: 3 });
      await store.saveSnapshot({ stream: 'a', seq: 9, state: { n: 9 } });
      expect(await store.latestSnapshot('a')).toEqual({ stream: 'a', seq: 9, state: { n: 9 } });

      await expect(store.prune('a', 10)).rejects.toMatchObject({ code: 'prune_past_snapshot' });
      expect(await store.prune('a', 8)).toBe(8);
      expect(await store.read('a')).toEqual(runesOf('a', 9, 2));
      expect(await store.read('a', 3)).toEqual(runesOf('a', 9, 2));
      expect(await store.head('a')).toEqual({ stream: 'a', machine: 'counter', seq: 10, value: 'idle', at: 100 }); // pruning keeps the head
      expect(await store.prune('a', 8)).toBe(0);
      await store.append([runeOf('a', 11)]);
      expect((await store.read('a')).map((r) => r.seq)).toEqual([9, 10, 11]);
      await store.close();
    });

    it("refuses a snapshot past the stream's last rune", async () => {
      const store = await makeStore();
      await store.append(runesOf('a', 1, 2));
      await expect(store.saveSnapshot({ stream: 'a', seq: 3, state: {} })).rejects.toBeInstanceOf(StoreError);
      await expect(store.saveSnapshot({ stream: 'nobody', seq: 1, state: {} })).rejects.toBeInstanceOf(StoreError);
      await store.close();
    });

    it('lists heads by machine and state name, in stream order, while appends go on', async () => {
      const store = await makeStore();
      const paused = (stream: string, seq: number): Rune => ({ ...runeOf(stream, seq, 'chat-actor'), kind: 'Pause', to: 'paused', at: 7 });
      await store.append([runeOf('c', 1, 'chat-actor'), runeOf('a', 1, 'chat-actor'), runeOf('t', 1, 'tool-call')]);
      await store.append([paused('a', 2)]);
      const listed: string[] = [];
      for await (const head of store.heads({ machine: 'chat-actor' })) {
        listed.push(`${head.stream}:${head.value}@${head.at}`);
        await store.append([runeOf(`new-${head.stream}`, 1, 'chat-actor')]); // writing while listing
      }
      expect(listed.slice(0, 2)).toEqual(['a:paused@7', 'c:idle@1']);
      const idle: string[] = [];
      for await (const head of store.heads({ machine: 'chat-actor', values: ['idle'] })) idle.push(head.stream);
      expect(idle).toEqual(['c', 'new-a', 'new-c']);
      const all: string[] = [];
      for await (const head of store.heads()) all.push(head.stream);
      expect(all).toEqual(['a', 'c', 'new-a', 'new-c', 't']);
      await store.close();
    });

    it('lists the heads of the streams under a prefix, the prefix itself included, and no others', async () => {
      const store = await makeStore();
      const ids = ['conv/c1', 'conv/c1/agent/a', 'conv/c1/agent/a/turn', 'conv/c10/agent/a', 'conv/c1/agent/b', 'conv/c0', 'conv/c1/agent/b/call/x'];
      await store.append(ids.map((id) => runeOf(id, 1, id.endsWith('/turn') ? 'turn-engine' : 'agent-lifecycle')));
      const listed = async (query: HeadsQuery): Promise<string[]> => {
        const streams: string[] = [];
        for await (const head of store.heads(query)) streams.push(head.stream);
        return streams;
      };
      expect(await listed({ prefix: 'conv/c1/' })).toEqual(['conv/c1/agent/a', 'conv/c1/agent/a/turn', 'conv/c1/agent/b', 'conv/c1/agent/b/call/x']);
      expect(await listed({ prefix: 'conv/c1' })).toEqual([
        'conv/c1',
        'conv/c1/agent/a',
        'conv/c1/agent/a/turn',
        'conv/c1/agent/b',
        'conv/c1/agent/b/call/x',
        'conv/c10/agent/a',
      ]);
      expect(await listed({ prefix: 'conv/c1/', machine: 'turn-engine' })).toEqual(['conv/c1/agent/a/turn']);
      expect(await listed({ prefix: 'conv/c2/' })).toEqual([]);
      // Streams made after a listing take their places in the next one.
      await store.append([runeOf('conv/c1/agent/aa', 1, 'agent-lifecycle'), runeOf('conv/c2/agent/a', 1, 'agent-lifecycle'), runeOf('conv/c1/agent/0', 1, 'agent-lifecycle')]);
      expect(await listed({ prefix: 'conv/c1/agent/a' })).toEqual(['conv/c1/agent/a', 'conv/c1/agent/a/turn', 'conv/c1/agent/aa']);
      expect(await listed({ prefix: 'conv/c2/' })).toEqual(['conv/c2/agent/a']);
      expect((await listed({})).slice(0, 3)).toEqual(['conv/c0', 'conv/c1', 'conv/c1/agent/0']);
      await store.close();
    });

    it('lists every stream under a prefix that names more than a page of them, in order, machine filter and all', async () => {
      const store = await makeStore();
      const under = Array.from({ length: 150 }, (_, i) => `many/${String(i).padStart(3, '0')}`);
      const machineOf = (id: string): string => (Number(id.slice(-3)) % 3 === 0 ? 'turn-engine' : 'agent-lifecycle');
      await store.append([...under, 'man', 'manx/1', 'manz/1', 'many'].map((id) => runeOf(id, 1, id.startsWith('many/') ? machineOf(id) : 'turn-engine')));
      const listed = async (query: HeadsQuery): Promise<string[]> => {
        const streams: string[] = [];
        for await (const head of store.heads(query)) streams.push(head.stream);
        return streams;
      };
      expect(await listed({ prefix: 'many/' })).toEqual(under);
      expect(await listed({ prefix: 'many/', machine: 'turn-engine' })).toEqual(under.filter((id) => machineOf(id) === 'turn-engine'));
      expect(await listed({ prefix: 'many/1', machine: 'agent-lifecycle' })).toEqual(under.filter((id) => id.startsWith('many/1') && machineOf(id) === 'agent-lifecycle'));
      await store.close();
    });

    it('rejects every call once closed, and closing twice is harmless', async () => {
      const store = await makeStore();
      await store.append(runesOf('a', 1, 2));
      await store.close();
      await expect(store.close()).resolves.toBeUndefined();
      const calls: Array<[string, () => Promise<unknown>]> = [
        ['append', () => store.append([runeOf('a', 3)])],
        ['head', () => store.head('a')],
        [
          'heads',
          async () => {
            for await (const head of store.heads()) void head;
          },
        ],
        ['read', () => store.read('a')],
        ['readEvents', () => store.readEvents('a')],
        ['latestSnapshot', () => store.latestSnapshot('a')],
        ['saveSnapshot', () => store.saveSnapshot({ stream: 'a', seq: 1, state: {} })],
        ['prune', () => store.prune('a', 1)],
      ];
      for (const [name, call] of calls) await expect(call(), name).rejects.toMatchObject({ code: 'closed' });
    });

    optionalMethodCases(makeStore, test, features);
  });
}
