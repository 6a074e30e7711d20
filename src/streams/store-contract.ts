import type { Rune } from '../reducers/rune.js';
import { StoreConflictError, StoreError, StoreFencedError, type HeadsQuery, type RuneStore } from './store.js';

/**
 * The test functions the contract runs on: vitest's, or jest's (`describe`, `it` and `expect`
 * as they come). Taken as arguments, so this file imports no test runner and ships in the
 * package.
 */
export interface ContractTestApi {
  describe(name: string, body: () => void): unknown;
  it(name: string, body: () => Promise<void>): unknown;
  expect(actual: unknown, message?: string): ContractAssertion;
}

/** The matchers the contract uses, as vitest and jest spell them. */
export interface ContractAssertion {
  toEqual(expected: unknown): void;
  toThrow(expected?: unknown): void;
  toHaveLength(expected: number): void;
  toBe(expected: unknown): void;
  toBeUndefined(): void;
  toBeInstanceOf(expected: unknown): void;
  toMatchObject(expected: object): void;
  readonly rejects: ContractPromiseAssertion;
  readonly resolves: ContractPromiseAssertion;
}

/** {@link ContractAssertion} on a promise's outcome. */
export interface ContractPromiseAssertion {
  toBeUndefined(): PromiseLike<void>;
  toBeInstanceOf(expected: unknown): PromiseLike<void>;
  toMatchObject(expected: object): PromiseLike<void>;
  toThrow(expected: string): PromiseLike<void>;
}

/** A rune of stream `stream` at `seq`: a spawn at seq 1, a `tick` after. */
export const runeOf = (stream: string, seq: number, machine = 'counter'): Rune =>
  seq === 1
    ? { stream, seq, machine, kind: 'spawned', event: { type: 'spawn', input: { n: seq } }, to: 'idle', at: seq }
    : { stream, seq, machine, kind: 'tick', event: { type: 'tick', n: seq, text: `é✓ "quoted" ${seq}` }, from: 'idle', to: 'idle', at: seq * 10 };

/** `count` runes of `stream` from `from`. */
export const runesOf = (stream: string, from: number, count: number): Rune[] => Array.from({ length: count }, (_, i) => runeOf(stream, from + i));

/** What a store says it has beyond the required methods: the suite checks each one it claims. */
export interface StoreFeatures {
  /** `appendSync`: commits one rune at once. */
  readonly appendSync?: boolean;
  /** `tail` and `raiseFence`: a store several writers share. Without them, one writer by construction. */
  readonly severalWriters?: boolean;
  /** `restore`: takes back pruned runes (from their archive). */
  readonly restore?: boolean;
}

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

      await expect(store.prune('a', 9)).rejects.toMatchObject({ code: 'prune_past_snapshot' });
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
        for (const runes of refused)
          await expect(store.restore!(runes), JSON.stringify(runes.map((r) => [r.stream, r.seq]))).rejects.toMatchObject({ code: 'invalid_restore' });
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
  });
}
