import type { Rune } from '../../reducers/rune.js';
import { checkGivenManifest, manifestKey, parseManifest, readSegment } from './archive-format.js';
import { coldCall } from './cold-call.js';
import type { ArchiveManifest, ColdStore } from './cold-store.js';

/**
 * The manifest of a stream's archive, or `undefined` when the stream has none. The manifest is
 * checked: its shape, its stream, segments that tile its seqs and stay inside its folder; one that
 * is not what `writeArchive` writes throws `invalid_manifest` naming its key.
 *
 * @see writeArchive
 */
export async function readManifest(cold: ColdStore, stream: string): Promise<ArchiveManifest | undefined> {
  const key = manifestKey(stream);
  const bytes = await coldCall(`get "${key}"`, () => cold.get(key));
  return bytes === undefined ? undefined : parseManifest(bytes, key, stream);
}

/** Which runes {@link readArchivedRunes} reads, as `RuneStore.read` takes them. */
export interface ReadArchivedRunesOptions {
  /** Runes with `seq > afterSeq`. Default 0. */
  readonly afterSeq?: number;
  /** At most this many. Default: all the rest. */
  readonly limit?: number;
}

/**
 * An archived stream's runes with `seq > afterSeq`, at most `limit`, in seq order: what a read of
 * a stream whose hot runes were pruned serves. It reads only the segments that hold them, and
 * checks each as `verifyArchive` does (checksum, runes, seqs), throwing an `ArchiveError` naming
 * the segment.
 */
export async function readArchivedRunes(cold: ColdStore, manifest: ArchiveManifest, options: ReadArchivedRunesOptions = {}): Promise<Rune[]> {
  const { afterSeq = 0, limit = Number.POSITIVE_INFINITY } = options;
  if (!Number.isInteger(afterSeq) || afterSeq < 0) throw new TypeError('readArchivedRunes: "afterSeq" is a seq (a non-negative integer)');
  if (limit !== Number.POSITIVE_INFINITY && (!Number.isInteger(limit) || limit < 0)) throw new TypeError('readArchivedRunes: "limit" is a non-negative integer');
  checkGivenManifest(manifest);
  const runes: Rune[] = [];
  for (const segment of manifest.segments) {
    if (runes.length >= limit) break;
    if (segment.toSeq <= afterSeq) continue;
    for (const rune of await readSegment(cold, manifest, segment)) {
      if (rune.seq <= afterSeq) continue;
      if (runes.length >= limit) break;
      runes.push(rune);
    }
  }
  return runes;
}
