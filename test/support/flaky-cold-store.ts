import type { ColdStore } from '../../src/index.js';

/** A cold store whose next `failures` calls fail, and what it was asked. */
export interface FlakyColdStore extends ColdStore {
  /** Every call, in order, as `put <key>` / `get <key>` / `list <prefix>` / `delete <key>`, failed ones included. */
  readonly calls: string[];
  /** Calls that failed so far. */
  readonly failed: number;
  /** Makes the next `n` calls fail too. */
  failNext(n: number): void;
}

/**
 * Wraps a cold store so that its first `failures` calls (of any operation) reject with a plain
 * Error, as a store whose network drops would, and the later ones reach `inner`: a write that
 * fails twice then succeeds is `flakyColdStore(inner, 2)`.
 */
export function flakyColdStore(inner: ColdStore, failures: number): FlakyColdStore {
  let left = failures;
  let failed = 0;
  const calls: string[] = [];
  const gate = <T>(call: string, run: () => Promise<T>): Promise<T> => {
    calls.push(call);
    if (left > 0) {
      left--;
      failed++;
      return Promise.reject(new Error(`${call}: connection reset (flaky cold store, failure ${failed})`));
    }
    return run();
  };
  return {
    calls,
    get failed() {
      return failed;
    },
    failNext(n) {
      left += n;
    },
    put: (key, body) => gate(`put ${key}`, () => inner.put(key, body)),
    get: (key) => gate(`get ${key}`, () => inner.get(key)),
    list: (prefix) => gate(`list ${prefix}`, () => inner.list(prefix)),
    delete: (key) => gate(`delete ${key}`, () => inner.delete(key)),
  };
}
