import type { Rune } from '../../reducers/rune.js';
import { readSegment } from './archive-format.js';
import type { ArchiveManifest, ColdStore } from './cold-store.js';
import { verifyArchive } from './verify-archive.js';

/** Which runes {@link restoreRunes} yields. */
export interface RestoreRunesOptions {
  /** Runes with `seq > afterSeq` (those the hot log no longer has). Default 0. */
  readonly afterSeq?: number;
}

/**
 * The archived runes with `seq > afterSeq`, a page (one segment's runes) at a time, for writing
 * them back. Before it yields anything it verifies the whole archive ({@link verifyArchive}): an
 * archive with a missing segment or a bad checksum throws before the first page, so a restore
 * that writes as it reads writes nothing. Each segment is read again as it is yielded, and checked
 * again, so a segment that changes in between still throws rather than restoring other runes.
 *
 * @example
 * ```ts no-run: a fragment: `cold`, `manifest` and `target` come from the surrounding program
 * for await (const page of restoreRunes(cold, manifest, { afterSeq: 0 })) await target.append(page);
 * ```
 */
export async function* restoreRunes(cold: ColdStore, manifest: ArchiveManifest, options: RestoreRunesOptions = {}): AsyncGenerator<Rune[], void, undefined> {
  const { afterSeq = 0 } = options;
  if (!Number.isInteger(afterSeq) || afterSeq < 0) throw new TypeError('restoreRunes: "afterSeq" is a seq (a non-negative integer)');
  await verifyArchive(cold, manifest);
  for (const segment of manifest.segments) {
    if (segment.toSeq <= afterSeq) continue;
    const runes = (await readSegment(cold, manifest, segment)).filter((rune) => rune.seq > afterSeq);
    if (runes.length > 0) yield runes;
  }
}
