import type { RuneStore } from '../../src/index.js';

/**
 * A store over `inner` that counts the runes read through it (`read` and `readEvents`): how a test
 * or an attack measures what a read costs without timing it. `runes` is the count; set it to 0 to
 * start again.
 */
export function countingStore(inner: RuneStore) {
  const counted = { runes: 0 };
  const store: RuneStore = Object.assign(Object.create(inner) as RuneStore, {
    read: async (...args: Parameters<RuneStore['read']>) => {
      const runes = await inner.read(...args);
      counted.runes += runes.length;
      return runes;
    },
    readEvents: async (...args: Parameters<RuneStore['readEvents']>) => {
      const events = await inner.readEvents(...args);
      counted.runes += events.length;
      return events;
    },
  });
  return { store, counted };
}
