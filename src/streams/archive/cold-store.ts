/**
 * Where archived streams live (seed 002's R2): a flat key-value store of immutable objects.
 * Keys are `/`-separated paths of safe characters (an archive's manifest and its segments).
 * A filesystem folder by default (`fsColdStore`), or any S3-compatible bucket (`s3ColdStore`,
 * from `runestream/s3`).
 */
export interface ColdStore {
  /** Writes the object whole, replacing any object of that key (a retried write overwrites). */
  put(key: string, body: Uint8Array): Promise<void>;
  /** The object, or `undefined` when there is none. */
  get(key: string): Promise<Uint8Array | undefined>;
  /** The keys that start with `prefix`, in key order. */
  list(prefix: string): Promise<string[]>;
  /** Deletes the object; deleting a missing one is not an error. */
  delete(key: string): Promise<void>;
}

/** One segment of an archived stream: compressed NDJSON of runes `fromSeq..toSeq`, and its checksum. */
export interface ArchiveSegment {
  /** The segment's key in the cold store. */
  readonly key: string;
  readonly fromSeq: number;
  readonly toSeq: number;
  /** The compressed object's size. */
  readonly bytes: number;
  /** Hex SHA-256 of the compressed object as stored. */
  readonly sha256: string;
}

/**
 * What an archive of one stream holds: written last, after its segments, so an archive whose
 * manifest can be read is whole. `version` is the format's version.
 */
export interface ArchiveManifest {
  readonly version: 1;
  readonly stream: string;
  readonly machine: string;
  /** The archive holds runes `1..seq` (runes already pruned from the hot log before are not in it). */
  readonly fromSeq: number;
  readonly seq: number;
  /** The stream's state after rune `seq`: what `snapshot` serves once the hot runes are gone. */
  readonly state: unknown;
  readonly segments: readonly ArchiveSegment[];
  /** When it was written, in scheduler time (ms). */
  readonly at: number;
}

/**
 * Stable codes of archive errors:
 * - `checksum_mismatch`: a segment read back does not match its manifest's checksum (the message names it).
 * - `missing_segment`: a segment the manifest lists is not in the cold store.
 * - `invalid_manifest` / `invalid_segment`: an object that is not what this format writes.
 * - `not_archived`: no archive of that stream.
 * - `cold_store_failed`: the cold store itself failed (I/O, network, HTTP status).
 */
export type ArchiveErrorCode = 'checksum_mismatch' | 'missing_segment' | 'invalid_manifest' | 'invalid_segment' | 'not_archived' | 'cold_store_failed';

/** An archive could not be written, read or verified; `code` says why. */
export class ArchiveError extends Error {
  override readonly name = 'ArchiveError';
  constructor(
    readonly code: ArchiveErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
