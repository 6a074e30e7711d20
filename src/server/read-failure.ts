import { errorText } from '../reducers/error-text.js';
import { isArchiveDamage } from '../streams/archived-reads.js';
import { StoreError } from '../streams/store.js';
import { StreamReadError } from '../streams/stream-read-error.js';
import type { ProtocolErrorCode } from './protocol.js';

/** Why reading a stream failed, as a client is told it. */
export interface ReadFailure {
  readonly code: ProtocolErrorCode;
  readonly message: string;
}

/**
 * The code a client is told for a failure to read or load a stream: damaged data keeps its own
 * code (`chain_broken` for a stored rune off its hash chain, `corrupt_file` for a page SQLite found
 * damaged; `newer_version` for a rune written by a newer version of its machine; `checksum_mismatch`,
 * `missing_segment`, `invalid_segment`, `invalid_manifest` for a damaged archive); anything else
 * is `internal`.
 */
export function failureCodeOf(error: unknown): ProtocolErrorCode {
  if (error instanceof StoreError && (error.code === 'chain_broken' || error.code === 'corrupt_file')) return error.code;
  if (error instanceof StreamReadError && error.code === 'newer_version') return error.code;
  return isArchiveDamage(error) ? error.code : 'internal';
}

/**
 * What a replay's error means for a subscriber (WebSocket or SSE): `undefined` when the runes were
 * pruned (`runes_missing`: the reader goes on from a snapshot), else the failure to tell it
 * ({@link failureCodeOf}). Damaged data is never a silent jump.
 */
export function readFailureOf(stream: string, error: unknown): ReadFailure | undefined {
  if (error instanceof StreamReadError && error.code === 'runes_missing') return undefined;
  const code = failureCodeOf(error);
  return { code, message: code === 'internal' ? `stream "${stream}": ${errorText(error)}` : (error as Error).message };
}
