import type { Rune, RuneStore } from '../../src/index.js';

/** Every rune in the store, of every stream, in the order they were written (by `at`, then stream and seq): a log for `checkInvariants`. */
export async function storeLog(store: RuneStore): Promise<Rune[]> {
  const runes: Rune[] = [];
  for await (const head of store.heads()) runes.push(...(await store.read(head.stream)));
  return runes.sort((a, b) => a.at - b.at || a.stream.localeCompare(b.stream) || a.seq - b.seq);
}
