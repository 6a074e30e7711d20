import { describe, expect, it } from 'vitest';
import { StoreConflictError } from '../../src/streams/store.js';
import { memoryStore } from '../../src/streams/memory-store.js';
import { runeOf, runesOf, storeContract } from '../../src/store-kit.js';

storeContract('memoryStore', () => memoryStore(), { describe, it, expect }, { appendSync: true, severalWriters: true, restore: true });

describe('memoryStore.appendSync', () => {
  it('commits one rune at once, with the same gapless check as append', async () => {
    const store = memoryStore();
    store.appendSync!(runeOf('a', 1, 'chat-actor'));
    store.appendSync!(runeOf('a', 2, 'chat-actor'));
    expect(() => store.appendSync!(runeOf('a', 4))).toThrow(StoreConflictError);
    expect(() => store.appendSync!(runeOf('b', 2))).toThrow('stream "b": expected seq 1, got 2; nothing of the batch was written');
    expect((await store.read('a')).map((r) => r.seq)).toEqual([1, 2]);
    expect(await store.head('b')).toBeUndefined();
    await store.close();
    expect(() => store.appendSync!(runeOf('a', 3))).toThrow('the store is closed');
  });
});

describe('memoryStore across its chunks of 1,024 runes', () => {
  it('reads, reads events and prunes runes that span several chunks', async () => {
    const store = memoryStore();
    await store.append([runeOf('a', 1, 'counter'), ...runesOf('a', 2, 2999)]);
    const seqs = async (after: number, limit?: number) => (await store.read('a', after, limit)).map((r) => r.seq);
    expect(await seqs(1020, 10)).toEqual([1021, 1022, 1023, 1024, 1025, 1026, 1027, 1028, 1029, 1030]);
    expect((await store.readEvents('a', 2046, 4)).length).toBe(4);
    expect(await store.readEvents('a', 2046, 4)).toEqual((await store.read('a', 2046, 4)).map((r) => r.event));

    await store.saveSnapshot({ stream: 'a', seq: 2100, state: 2100 });
    expect(await store.prune('a', 1500)).toBe(1500);
    expect(await seqs(0, 3)).toEqual([1501, 1502, 1503]);
    expect(await store.prune('a', 2100)).toBe(600); // the rest of a chunk, then into the next
    expect(await seqs(0, 2)).toEqual([2101, 2102]);
    expect((await store.read('a')).length).toBe(900);
    store.appendSync!(runeOf('a', 3001));
    expect((await store.read('a', 2999)).map((r) => r.seq)).toEqual([3000, 3001]);
    expect(await store.head('a')).toMatchObject({ seq: 3001 });
  });

  it('prunes a stream whose every rune a snapshot covers, and goes on from there', async () => {
    const store = memoryStore();
    await store.append([runeOf('a', 1, 'counter'), ...runesOf('a', 2, 2047)]);
    await store.saveSnapshot({ stream: 'a', seq: 2048, state: 2048 });
    expect(await store.prune('a', 2048)).toBe(2048);
    expect(await store.read('a')).toEqual([]);
    await store.append([runeOf('a', 2049)]);
    expect((await store.read('a')).map((r) => r.seq)).toEqual([2049]);
  });

  it("grows a young stream's chunk rune by rune through every capacity, keeping each rune, and prunes inside it", async () => {
    const store = memoryStore();
    const written = [runeOf('a', 1, 'counter'), ...runesOf('a', 2, 1100)];
    for (const rune of written) store.appendSync!(rune);
    expect(await store.read('a')).toEqual(written);
    expect(await store.readEvents('a', 7, 3)).toEqual(written.slice(7, 10).map((r) => r.event));

    const young = memoryStore();
    await young.append([runeOf('b', 1, 'counter'), ...runesOf('b', 2, 11)]);
    await young.saveSnapshot({ stream: 'b', seq: 10, state: 10 });
    expect(await young.prune('b', 10)).toBe(10);
    await young.append(runesOf('b', 13, 28));
    expect((await young.read('b')).map((r) => r.seq)).toEqual(Array.from({ length: 30 }, (_, i) => 11 + i));
  });
});
