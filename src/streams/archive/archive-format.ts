import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { z } from 'zod';
import { errorText } from '../../reducers/error-text.js';
import { Rune } from '../../reducers/rune.js';
import { checkColdKey, streamKeyPart } from './cold-key.js';
import { coldCall } from './cold-call.js';
import { ArchiveError, type ArchiveManifest, type ArchiveSegment, type ColdStore } from './cold-store.js';

/**
 * The archive format's mechanics, shared by writing, reading and verifying: where an archive's
 * objects live, how a segment is encoded, and the manifest's schema.
 *
 * An archive of stream `s` is `streams/<s encoded>/manifest.json` (JSON, written last) and its
 * segments `streams/<s encoded>/<fromSeq>-<toSeq>.ndjson.gz` (seqs zero-padded to 12 digits, so
 * key order is seq order): gzip of one rune per line, as JSON.
 */

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/** The largest segment, uncompressed, a reader inflates (a gzip bomb stops there). */
export const MAX_SEGMENT_INFLATED_BYTES = 256 * 1024 * 1024;

/** The largest manifest a reader parses. */
export const MAX_MANIFEST_BYTES = 16 * 1024 * 1024;

/** The folder of a stream's archive: `streams/<encoded id>/`. */
export const archivePrefix = (stream: string): string => `streams/${streamKeyPart(stream)}/`;

/** The key of a stream's manifest. */
export const manifestKey = (stream: string): string => `${archivePrefix(stream)}manifest.json`;

const pad = (seq: number): string => String(seq).padStart(12, '0');

/** The key of the segment of runes `fromSeq..toSeq`. */
export const segmentKey = (stream: string, fromSeq: number, toSeq: number): string => `${archivePrefix(stream)}${pad(fromSeq)}-${pad(toSeq)}.ndjson.gz`;

/** Hex SHA-256 of the bytes. */
export const sha256Hex = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** Gzip of the text as UTF-8. */
export const gzipText = async (text: string): Promise<Uint8Array> => new Uint8Array(await gzipAsync(Buffer.from(text, 'utf8')));

/** The UTF-8 text gzipped in `bytes`, inflating at most {@link MAX_SEGMENT_INFLATED_BYTES}; throws on bad gzip or UTF-8. */
export const gunzipText = async (bytes: Uint8Array): Promise<string> =>
  new TextDecoder('utf-8', { fatal: true }).decode(await gunzipAsync(bytes, { maxOutputLength: MAX_SEGMENT_INFLATED_BYTES }));

/** Gzipped NDJSON of lines already serialized (each without its line break). */
export const encodeSegment = (lines: readonly string[]): Promise<Uint8Array> => gzipText(`${lines.join('\n')}\n`);

const seq = z.number().int().nonnegative();

const ArchiveSegmentSchema = z.strictObject({
  key: z.string().min(1),
  fromSeq: seq.min(1),
  toSeq: seq.min(1),
  bytes: seq,
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});

/** What a manifest must look like, beyond JSON: the shape of {@link ArchiveManifest}. */
const ArchiveManifestSchema = z.strictObject({
  version: z.literal(1),
  stream: z.string().min(1),
  machine: z.string().min(1),
  fromSeq: seq.min(1),
  seq,
  state: z.unknown(),
  segments: z.array(ArchiveSegmentSchema),
  at: z.number(),
});

/**
 * Parses and checks a manifest read from `key`, for `stream`: its shape, its stream, segments that
 * tile `fromSeq..seq` in order without gap or overlap, and segment keys inside the stream's archive
 * folder (a manifest cannot send a reader elsewhere). Throws `invalid_manifest` naming the key.
 */
export function parseManifest(bytes: Uint8Array, key: string, stream: string): ArchiveManifest {
  const invalid = (why: string, cause?: unknown) => new ArchiveError('invalid_manifest', `archive manifest "${key}" is invalid: ${why}`, { cause });
  if (bytes.byteLength > MAX_MANIFEST_BYTES) throw invalid(`it is larger than ${MAX_MANIFEST_BYTES} bytes`);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (error) {
    throw invalid(`not JSON (${errorText(error)})`, error);
  }
  const parsed = ArchiveManifestSchema.safeParse(json);
  if (!parsed.success) throw invalid(z.prettifyError(parsed.error).replace(/\n/g, '; '), parsed.error);
  const manifest = parsed.data as ArchiveManifest;
  checkManifest(manifest, stream, invalid);
  return manifest;
}

/** The checks of {@link parseManifest} past the shape; also run on a manifest a caller hands in. */
export function checkManifest(manifest: ArchiveManifest, stream: string, invalid: (why: string) => Error): void {
  if (manifest.stream !== stream) throw invalid(`it is the archive of stream "${manifest.stream}", not "${stream}"`);
  let next = manifest.fromSeq;
  const prefix = archivePrefix(stream);
  for (const segment of manifest.segments) {
    if (segment.fromSeq !== next || segment.toSeq < segment.fromSeq)
      throw invalid(`segment "${segment.key}" holds ${segment.fromSeq}..${segment.toSeq}, expected it to start at ${next}`);
    if (!segment.key.startsWith(prefix) || segment.key.slice(prefix.length).includes('/'))
      throw invalid(`segment key "${segment.key}" is outside the stream's archive "${prefix}"`);
    try {
      checkColdKey(segment.key);
    } catch (error) {
      throw invalid(errorText(error));
    }
    next = segment.toSeq + 1;
  }
  if (next !== manifest.seq + 1) throw invalid(`its segments end at ${next - 1}, not at its seq ${manifest.seq}`);
}

/** {@link checkManifest} of a manifest a caller hands in (read before, or just written). */
export const checkGivenManifest = (manifest: ArchiveManifest): void =>
  checkManifest(manifest, manifest.stream, (why) => new ArchiveError('invalid_manifest', `archive manifest of "${manifest.stream}" is invalid: ${why}`));

/**
 * Reads a segment and checks it against its manifest entry: present (`missing_segment`), its bytes'
 * SHA-256 (`checksum_mismatch`), gzip of UTF-8 lines each a rune of the stream and machine, with
 * exactly the seqs `fromSeq..toSeq` in order (`invalid_segment`). Every error names the segment.
 */
export async function readSegment(cold: ColdStore, manifest: ArchiveManifest, segment: ArchiveSegment): Promise<Rune[]> {
  const bytes = await coldCall(`get "${segment.key}"`, () => cold.get(segment.key));
  if (bytes === undefined)
    throw new ArchiveError(
      'missing_segment',
      `archive of "${manifest.stream}": segment "${segment.key}" (runes ${segment.fromSeq}..${segment.toSeq}) is not in the cold store`,
    );
  const sha256 = sha256Hex(bytes);
  if (sha256 !== segment.sha256 || bytes.byteLength !== segment.bytes)
    throw new ArchiveError(
      'checksum_mismatch',
      `archive of "${manifest.stream}": segment "${segment.key}" does not match its checksum (sha256 ${sha256}, ${bytes.byteLength} bytes; the manifest says ${segment.sha256}, ${segment.bytes} bytes)`,
    );
  const invalid = (why: string, cause?: unknown) =>
    new ArchiveError('invalid_segment', `archive of "${manifest.stream}": segment "${segment.key}" is invalid: ${why}`, { cause });
  let text: string;
  try {
    text = await gunzipText(bytes);
  } catch (error) {
    throw invalid(`not gzipped UTF-8 text (${errorText(error)})`, error);
  }
  const lines = text.endsWith('\n') ? text.slice(0, -1).split('\n') : text.split('\n');
  if (lines.length !== segment.toSeq - segment.fromSeq + 1) throw invalid(`it has ${lines.length} lines for runes ${segment.fromSeq}..${segment.toSeq}`);
  return lines.map((line, i) => {
    const expected = segment.fromSeq + i;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch (error) {
      throw invalid(`line ${i + 1} is not JSON`, error);
    }
    const parsed = Rune.safeParse(json);
    if (!parsed.success) throw invalid(`line ${i + 1} is not a rune (${z.prettifyError(parsed.error).replace(/\n/g, '; ')})`, parsed.error);
    const rune = parsed.data as Rune;
    if (rune.seq !== expected) throw invalid(`line ${i + 1} has seq ${rune.seq}, expected ${expected}`);
    if (rune.stream !== manifest.stream || rune.machine !== manifest.machine)
      throw invalid(`rune ${rune.seq} is of stream "${rune.stream}" and machine "${rune.machine}", not "${manifest.stream}" and "${manifest.machine}"`);
    return rune;
  });
}
