import type { Rune } from '../reducers/rune.js';
import { ArchiveError, type ColdStore } from './archive/cold-store.js';
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
 * 4. A damaged archive (a segment that fails its checksum, is missing or is not what was written,
 *    a manifest that is not one) is never taken for pruned history: the read fails with the
 *    `ArchiveError` naming the segment (`checksum_mismatch`, `missing_segment`, `invalid_segment`,
 *    `invalid_manifest`), and `damaged` is told first (the engine reports it on `errors$`).
 *
 * The codec is loaded on the first read that needs it: the root entry stays light.
 */
export function archivedReads(store: Pick<RuneStore, 'read' | 'head'>, cold: ColdStore, damaged: (stream: string, error: ArchiveError) => void = () => {}): ReadRunes {
  return async (stream, afterSeq, limit) => {
    const page = await store.read(stream, afterSeq, limit);
    if (page[0]?.seq === afterSeq + 1) return page;
    if (page.length === 0 && ((await store.head(stream))?.seq ?? 0) <= afterSeq) return page;
    const { readManifest, readArchivedRunes } = await import('./archive/read-archive.js');
    try {
      const manifest = await readManifest(cold, stream);
      if (manifest === undefined || manifest.seq <= afterSeq) return page;
      const archived = await readArchivedRunes(cold, manifest, { afterSeq, limit: Number.isFinite(limit) ? limit : undefined });
      return archived.length > 0 ? archived : page;
    } catch (error) {
      if (isArchiveDamage(error)) damaged(stream, error);
      throw error;
    }
  };
}

/** The archive errors that say the archive itself is damaged (not that the cold store is unreachable). */
export const ARCHIVE_DAMAGE_CODES = ['checksum_mismatch', 'missing_segment', 'invalid_segment', 'invalid_manifest'] as const;

/** Whether `error` says an archive is damaged: an `ArchiveError` of one of {@link ARCHIVE_DAMAGE_CODES}. */
export const isArchiveDamage = (error: unknown): error is ArchiveError & { code: (typeof ARCHIVE_DAMAGE_CODES)[number] } =>
  error instanceof ArchiveError && (ARCHIVE_DAMAGE_CODES as readonly string[]).includes(error.code);
