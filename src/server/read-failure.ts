import { errorText } from '../reducers/error-text.js';
import { isArchiveDamage } from '../streams/archived-reads.js';
import { StreamReadError } from '../streams/stream-read-error.js';
import type { ProtocolErrorCode } from './protocol.js';

/** Why a replay of a stream's runes failed, as a subscriber is told it. */
export interface ReadFailure {
  readonly code: ProtocolErrorCode;
  readonly message: string;
}

/**
 * What a replay's error means for a subscriber (WebSocket or SSE): `undefined` when the runes were
 * pruned (`runes_missing`: the reader goes on from a snapshot), else the failure to tell it. A
 * damaged archive keeps its code (`checksum_mismatch` naming the segment, `missing_segment`,
 * `invalid_segment`, `invalid_manifest`); anything else is `internal`. Never a silent jump.
 */
export function readFailureOf(stream: string, error: unknown): ReadFailure | undefined {
  if (error instanceof StreamReadError && error.code === 'runes_missing') return undefined;
  if (isArchiveDamage(error)) return { code: error.code, message: error.message };
  return { code: 'internal', message: `stream "${stream}": ${errorText(error)}` };
}
