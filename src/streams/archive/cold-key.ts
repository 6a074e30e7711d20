import { createHash } from 'node:crypto';

/** The longest cold-store key, in characters (S3's own limit is 1024 bytes; keys are ASCII). */
export const MAX_COLD_KEY_LENGTH = 1024;

/** The longest part of a key between two `/` (a file name on most filesystems is at most 255 bytes). */
export const MAX_COLD_KEY_PART_LENGTH = 255;

/** The characters a key part may hold: letters, digits and `-`, `_`, `.`, `~`, `%` (percent-encoding). */
const KEY_PART = /^[A-Za-z0-9\-_.~%]+$/;

/**
 * A key (or a listing prefix) a cold store refuses: `code` is always `invalid_cold_key`. A
 * TypeError, since a bad key is the caller's bug, not the store failing: retrying cannot help.
 */
export class ColdKeyError extends TypeError {
  override readonly name = 'ColdKeyError';
  readonly code = 'invalid_cold_key';
  constructor(
    readonly key: string,
    reason: string,
  ) {
    super(`cold-store key ${JSON.stringify(key.length > 80 ? `${key.slice(0, 80)}…` : key)} is refused: ${reason}`);
  }
}

/**
 * Checks a cold-store key, the same way for every store, so a key one store takes every store
 * takes: `/`-separated non-empty parts of safe characters, none starting with `.` (so no `.`, no
 * `..`, no hidden file), no leading `/` (no absolute path), at most {@link MAX_COLD_KEY_LENGTH}
 * characters and {@link MAX_COLD_KEY_PART_LENGTH} per part. Throws a {@link ColdKeyError}.
 */
export function checkColdKey(key: string): void {
  if (typeof key !== 'string' || key.length === 0) throw new ColdKeyError(String(key), 'a key is a non-empty string');
  checkParts(key, key.split('/'));
}

/**
 * Checks a listing prefix: a key's beginning, so it may be empty, end with `/`, or end in the
 * middle of a part (`streams/conv` lists `streams/conv%2Fa/…`). Throws a {@link ColdKeyError}.
 */
export function checkColdPrefix(prefix: string): void {
  if (typeof prefix !== 'string') throw new ColdKeyError(String(prefix), 'a prefix is a string');
  if (prefix === '') return;
  const parts = prefix.split('/');
  const last = parts.pop()!;
  if (parts.length > 0) checkParts(prefix, parts);
  if (last !== '' && !KEY_PART.test(last)) throw new ColdKeyError(prefix, 'its last part has a character other than letters, digits and - _ . ~ %');
  if (prefix.length > MAX_COLD_KEY_LENGTH) throw new ColdKeyError(prefix, `it is longer than ${MAX_COLD_KEY_LENGTH} characters`);
}

function checkParts(key: string, parts: readonly string[]): void {
  if (key.length > MAX_COLD_KEY_LENGTH) throw new ColdKeyError(key, `it is longer than ${MAX_COLD_KEY_LENGTH} characters`);
  for (const part of parts) {
    if (part === '') throw new ColdKeyError(key, key.startsWith('/') ? 'an absolute path is not a key' : 'it has an empty part (`//` or a trailing `/`)');
    if (part.startsWith('.')) throw new ColdKeyError(key, 'a part starts with `.` (`.`, `..` and hidden names are not keys)');
    if (!KEY_PART.test(part)) throw new ColdKeyError(key, 'it has a character other than letters, digits and / - _ . ~ %');
    if (part.length > MAX_COLD_KEY_PART_LENGTH) throw new ColdKeyError(key, `a part is longer than ${MAX_COLD_KEY_PART_LENGTH} characters`);
  }
}

/** Encoded stream ids longer than this are cut and end with a hash of the whole id. */
const MAX_ENCODED_STREAM_ID = 200;

/**
 * A stream id as one key part, whatever it holds: percent-encoded (`conv/c1/chat` becomes
 * `conv%2Fc1%2Fchat`; `.` at the start, `!'()*~` too), so distinct ids give distinct parts and the
 * part reads back as the id. An id whose encoding is longer than 200 characters keeps its first
 * 150 and ends with `~` and 32 hex digits of its SHA-256: still one id per part in practice, and
 * the manifest records the id itself, which a reader checks.
 */
export function streamKeyPart(stream: string): string {
  const hash = (length: number) => createHash('sha256').update(stream).digest('hex').slice(0, length);
  let encoded: string;
  try {
    encoded = encodeURIComponent(stream)
      .replace(/[!'()*~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
      .replace(/^\./, '%2E');
  } catch {
    return `~${hash(64)}`; // a lone surrogate, which encodeURIComponent refuses
  }
  if (encoded.length <= MAX_ENCODED_STREAM_ID) return encoded;
  // Cut before a partial `%XY`, so the kept part still decodes.
  const kept = encoded.slice(0, 150).replace(/%[0-9A-F]?$/, '');
  return `${kept}~${hash(32)}`;
}
