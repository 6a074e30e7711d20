import { memoryStore, type Rune, type RuneStore } from '../../src/index.js';

/** Options of {@link heldStore}. */
export interface HeldStoreOptions {
  /** Commit each rune at once (`appendSync`, as the memory store does); else only in batches, where a test can hold them. Default false. */
  readonly sync?: boolean;
  /** Told of every write, before it happens. */
  readonly onWrite?: (write: 'append' | 'appendSync', runes: readonly Rune[]) => void;
  /** `close()` does nothing: the store is shared by several engines of one test. Default false. */
  readonly keepOpen?: boolean;
}

/**
 * A store over `inner` whose batches can be held back and released, and made to fail once with a
 * given error: how a test puts the engine between a dispatch and its commit. It records every
 * batch (`appends`) and the most batches ever in flight at once.
 */
export function heldStore(inner: RuneStore = memoryStore(), options: HeldStoreOptions = {}) {
  const { sync = false, onWrite, keepOpen = false } = options;
  const appends: Rune[][] = [];
  let gate: Promise<void> = Promise.resolve();
  let failNext: Error | undefined;
  let inFlight = 0;
  let maxInFlight = 0;
  const store: RuneStore = {
    ...inner,
    appendSync: sync
      ? (rune, options) => {
          onWrite?.('appendSync', [rune]);
          inner.appendSync!(rune, options);
        }
      : undefined,
    append: async (runes, options) => {
      onWrite?.('append', runes);
      appends.push([...runes]);
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      try {
        await gate;
        if (failNext !== undefined) {
          const error = failNext;
          failNext = undefined;
          throw error;
        }
        await inner.append(runes, options);
      } finally {
        inFlight--;
      }
    },
    ...(keepOpen ? { close: async () => {} } : {}),
  };
  return {
    store,
    inner,
    appends,
    maxInFlight: () => maxInFlight,
    /** Holds every batch from now on; the returned function releases them. */
    hold: () => {
      let release!: () => void;
      gate = new Promise((r) => (release = r));
      return () => {
        gate = Promise.resolve();
        release();
      };
    },
    failNextAppend: (error: Error) => (failNext = error),
  };
}
