import type { Rune } from '../../reducers/rune.js';
import { encodeSegment, manifestKey, segmentKey, sha256Hex } from './archive-format.js';
import { coldCall } from './cold-call.js';
import type { ArchiveManifest, ArchiveSegment, ColdStore } from './cold-store.js';

/** What {@link writeArchive} archives, and how it cuts segments. */
export interface WriteArchiveOptions {
  readonly stream: string;
  /** The stream's machine id: every rune must be of it. */
  readonly machine: string;
  /** The stream's state after its last rune (after `afterSeq` when there are no runes). */
  readonly state: unknown;
  /**
   * The runes, in seq order without gap: an array, or an async iterable that yields runes or pages
   * of runes (see {@link storeRunePages}), so a long stream is never held whole in memory.
   */
  readonly runes: Iterable<Rune> | AsyncIterable<Rune | readonly Rune[]>;
  /** When the archive is written, in scheduler time (ms): the manifest's `at`. */
  readonly at: number;
  /**
   * The seq the runes continue: the first rune must be `afterSeq + 1`. Default: the first rune's
   * seq - 1 (runes pruned before are not in the archive), or 0 when there are no runes.
   */
  readonly afterSeq?: number;
  /** The most runes in one segment. Default 10 000. */
  readonly maxSegmentRunes?: number;
  /** The most bytes of NDJSON (before gzip) in one segment; a single larger rune gets a segment of its own. Default 4 MiB. */
  readonly maxSegmentBytes?: number;
}

/**
 * Writes a stream's runes to the cold store as an archive, and resolves to its manifest.
 *
 * 1. Runes are checked as they come (the stream, the machine, seqs that continue without gap); a
 *    rune that does not fit throws a `RangeError` and no manifest is written.
 * 2. Every `maxSegmentRunes` runes (or `maxSegmentBytes` of NDJSON) make a segment: gzipped NDJSON,
 *    put at `streams/<encoded stream>/<fromSeq>-<toSeq>.ndjson.gz`, its SHA-256 recorded. Only one
 *    segment is held in memory at a time.
 * 3. The manifest is written last, at `streams/<encoded stream>/manifest.json`: an archive whose
 *    manifest can be read is whole. Writing again replaces it (segments of the same seq range are
 *    overwritten with the same runes; a retried write is safe).
 * 4. A cold store failure rejects with an `ArchiveError` (`cold_store_failed` for a store that
 *    throws anything else).
 *
 * It does not read the archive back: {@link verifyArchive} does, before the hot runes are pruned.
 *
 * @see readManifest, readArchivedRunes, verifyArchive, restoreRunes
 */
export async function writeArchive(cold: ColdStore, options: WriteArchiveOptions): Promise<ArchiveManifest> {
  const { stream, machine, state, runes, at, maxSegmentRunes = 10_000, maxSegmentBytes = 4 * 1024 * 1024 } = options;
  if (typeof stream !== 'string' || stream === '') throw new TypeError('writeArchive: "stream" is a non-empty stream id');
  if (typeof machine !== 'string' || machine === '') throw new TypeError('writeArchive: "machine" is a non-empty machine id');
  if (!Number.isFinite(at)) throw new TypeError('writeArchive: "at" is a time in ms (a finite number)');
  if (!Number.isInteger(maxSegmentRunes) || maxSegmentRunes < 1) throw new TypeError('writeArchive: "maxSegmentRunes" is a positive integer');
  if (!Number.isInteger(maxSegmentBytes) || maxSegmentBytes < 1) throw new TypeError('writeArchive: "maxSegmentBytes" is a positive integer');
  if (options.afterSeq !== undefined && (!Number.isInteger(options.afterSeq) || options.afterSeq < 0))
    throw new TypeError('writeArchive: "afterSeq" is a seq (a non-negative integer)');

  const segments: ArchiveSegment[] = [];
  let lastSeq = options.afterSeq;
  let lines: string[] = [];
  let lineBytes = 0;
  let fromSeq = 0;

  const flush = async () => {
    if (lines.length === 0) return;
    const body = await encodeSegment(lines);
    const key = segmentKey(stream, fromSeq, lastSeq!);
    await coldCall(`put "${key}"`, () => cold.put(key, body));
    segments.push({ key, fromSeq, toSeq: lastSeq!, bytes: body.byteLength, sha256: sha256Hex(body) });
    lines = [];
    lineBytes = 0;
  };

  const add = async (rune: Rune) => {
    if (rune.stream !== stream || rune.machine !== machine)
      throw new RangeError(`writeArchive: rune ${rune.seq} is of stream "${rune.stream}" and machine "${rune.machine}", not "${stream}" and "${machine}"`);
    const expected = lastSeq === undefined ? rune.seq : lastSeq + 1;
    if (rune.seq !== expected || !Number.isInteger(rune.seq) || rune.seq < 1)
      throw new RangeError(`writeArchive: stream "${stream}": expected rune ${expected}, got ${rune.seq} (runes come in seq order, without gap)`);
    const line = JSON.stringify(rune);
    const bytes = Buffer.byteLength(line, 'utf8') + 1;
    if (lines.length >= maxSegmentRunes || (lines.length > 0 && lineBytes + bytes > maxSegmentBytes)) await flush();
    if (lines.length === 0) fromSeq = rune.seq;
    lines.push(line);
    lineBytes += bytes;
    lastSeq = rune.seq;
  };

  let first: number | undefined;
  for await (const item of runes as AsyncIterable<Rune | readonly Rune[]>)
    for (const rune of Array.isArray(item) ? (item as readonly Rune[]) : [item as Rune]) {
      first ??= rune.seq;
      await add(rune);
    }
  await flush();

  const manifest: ArchiveManifest = {
    version: 1,
    stream,
    machine,
    fromSeq: (options.afterSeq ?? (first === undefined ? 0 : first - 1)) + 1,
    seq: lastSeq ?? 0,
    state,
    segments,
    at,
  };
  const key = manifestKey(stream);
  const body = new TextEncoder().encode(JSON.stringify(manifest));
  await coldCall(`put "${key}"`, () => cold.put(key, body));
  return manifest;
}
