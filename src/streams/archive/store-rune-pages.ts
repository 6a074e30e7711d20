import type { Rune } from '../../reducers/rune.js';
import type { RuneStore } from '../store.js';

/** Which runes {@link storeRunePages} reads. */
export interface StoreRunePagesOptions {
  /** Runes with `seq > afterSeq`. Default 0. */
  readonly afterSeq?: number;
  /** Runes per `store.read`. Default 1000. */
  readonly pageSize?: number;
  /** Stop after this seq (the seq a snapshot or an archive covers). Default: the stream's end when read. */
  readonly throughSeq?: number;
}

/**
 * A stream's runes from a store, a page of `store.read(stream, afterSeq, pageSize)` at a time,
 * until the stream (or `throughSeq`) ends: what `writeArchive` takes as `runes`, so archiving a
 * long stream holds one page and one segment in memory, never the stream.
 *
 * @example
 * ```ts no-run: a fragment: `store`, `cold`, `stream`, `state` and `at` come from the surrounding program
 * const head = await store.head(stream);
 * await writeArchive(cold, { stream, machine: head.machine, state, at, runes: storeRunePages(store, stream, { throughSeq: head.seq }) });
 * ```
 */
export async function* storeRunePages(store: RuneStore, stream: string, options: StoreRunePagesOptions = {}): AsyncGenerator<Rune[], void, undefined> {
  const { pageSize = 1000, throughSeq = Number.POSITIVE_INFINITY } = options;
  let afterSeq = options.afterSeq ?? 0;
  if (!Number.isInteger(pageSize) || pageSize < 1) throw new TypeError('storeRunePages: "pageSize" is a positive integer');
  while (afterSeq < throughSeq) {
    const limit = Math.min(pageSize, throughSeq - afterSeq);
    const page = await store.read(stream, afterSeq, limit);
    if (page.length === 0) return;
    yield page;
    afterSeq = page.at(-1)!.seq;
    if (page.length < limit) return;
  }
}
