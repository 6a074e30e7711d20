import { checkGivenManifest, readSegment } from './archive-format.js';
import type { ArchiveManifest, ColdStore } from './cold-store.js';

/** What {@link verifyArchive} read back. */
export interface ArchiveVerification {
  readonly segments: number;
  readonly runes: number;
  /** The compressed bytes read. */
  readonly bytes: number;
}

/**
 * Reads every segment of the archive back and checks it: present (`missing_segment`), its SHA-256
 * (`checksum_mismatch`), and its runes: of the manifest's stream and machine, seqs continuing
 * without gap from `fromSeq` to `seq` (`invalid_segment`). Throws the first `ArchiveError`, whose
 * message names the segment; resolves to what it read. One segment is held in memory at a time.
 *
 * What must pass before a stream's hot runes are pruned, and before a restore writes anything.
 */
export async function verifyArchive(cold: ColdStore, manifest: ArchiveManifest): Promise<ArchiveVerification> {
  checkGivenManifest(manifest);
  let runes = 0;
  let bytes = 0;
  for (const segment of manifest.segments) {
    runes += (await readSegment(cold, manifest, segment)).length;
    bytes += segment.bytes;
  }
  return { segments: manifest.segments.length, runes, bytes };
}
