import type { Rune } from '../reducers/rune.js';
import type { ColdStore } from './archive/cold-store.js';
import type { RuneStore } from './store.js';

/** A stream's runes with `seq > afterSeq`, at most `limit`, as `RuneStore.read` gives them. */
export type ReadRunes = (stream: string, afterSeq: number, limit: number) => Promise<Rune[]>;

/**
 * A read of a stream's runes that serves the pruned ones from their archive (the engine's
 * `archive` option): read-only, what `runes$` and an epic's `read` replay.
 *
 * 1. The hot log first: a page that starts right after `afterSeq` is served as it is.
 * 2. A page that starts later (or none, below the stream's head): the runes were pruned. The
 *    stream's archive manifest is read and, if it holds runes after `afterSeq`, they are served
 *    from its segments (checked against their checksums as they are read).
 * 3. Without an archive holding them, the hot page is served, and the reader sees the gap
 *    (`runes_missing` from `runes$`), as without the option.
 *
 * The codec is loaded on the first read that needs it: the root entry stays light.
 */
export function archivedReads(store: RuneStore, cold: ColdStore): ReadRunes {
  return async (stream, afterSeq, limit) => {
    const page = await store.read(stream, afterSeq, limit);
    if (page[0]?.seq === afterSeq + 1) return page;
    if (page.length === 0 && ((await store.head(stream))?.seq ?? 0) <= afterSeq) return page;
    const { readManifest, readArchivedRunes } = await import('./archive/read-archive.js');
    const manifest = await readManifest(cold, stream);
    if (manifest === undefined || manifest.seq <= afterSeq) return page;
    const archived = await readArchivedRunes(cold, manifest, { afterSeq, limit: Number.isFinite(limit) ? limit : undefined });
    return archived.length > 0 ? archived : page;
  };
}
