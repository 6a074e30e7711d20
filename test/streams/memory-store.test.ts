import { describe, expect, it } from 'vitest';
import { StoreConflictError } from '../../src/streams/store.js';
import { memoryStore } from '../../src/streams/memory-store.js';
import { describeStoreContract, runeOf } from '../support/store-contract.js';


describeStoreContract('memoryStore', () => memoryStore());

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
