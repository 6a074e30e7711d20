import type { WebSocket } from 'ws';

/** What `ws` holds of a connection's inbound data that is not a whole message yet. */
export interface HeldInbound {
  /** Bytes held: raw bytes not parsed yet, plus the payload of the unfinished message's completed fragments. */
  readonly bytes: number;
  /** Whether a message (or a frame) has been started and not finished. */
  readonly started: boolean;
}

/** The private fields of `ws`'s `Receiver` (ws 8.23 `lib/receiver.js`) read below. */
interface ReceiverInternals {
  /** Raw bytes received and not parsed yet (a partial frame, or pipelined frames). */
  _bufferedBytes?: number;
  /** The payload of the completed fragments of the unfinished message (uncompressed). */
  _messageLength?: number;
  /** The opcode of the unfinished fragmented message, 0 when none. */
  _fragmented?: number;
}

/**
 * How much of a connection's unfinished inbound data `ws` holds. `ws` exposes no public figure
 * for it (only `maxPayload`, per message), yet a bound across all connections and a deadline
 * for an unfinished message need one: this is the one place that reads `ws`'s private receiver,
 * so an upgrade of `ws` that renames its fields breaks here (test/server/inbound.test.ts fails).
 */
export function heldInbound(ws: WebSocket): HeldInbound {
  const receiver = (ws as unknown as { _receiver?: ReceiverInternals | null })._receiver;
  if (receiver === undefined || receiver === null) return { bytes: 0, started: false };
  const buffered = receiver._bufferedBytes ?? 0;
  const fragments = receiver._messageLength ?? 0;
  return { bytes: buffered + fragments, started: buffered > 0 || fragments > 0 || (receiver._fragmented ?? 0) !== 0 };
}
