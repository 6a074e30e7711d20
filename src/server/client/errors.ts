import type { ProtocolErrorCode } from '../protocol.js';

/**
 * Why a client request or stream failed, or what the client reports on `errors$`. The server's
 * codes (see {@link ProtocolErrorCode}) pass through as they are; the client adds:
 * - `connection_lost`: the socket dropped while a request was in flight. The request is not
 *   retried (a dispatch is not idempotent); on `errors$`, a socket that dropped (the client reconnects).
 * - `closed`: `close()` was called before the request was answered (also a server code).
 * - `invalid_server_message`: a frame from the server that is not a message of the protocol; ignored.
 * - `unexpected_message`: a valid message the client did not ask for (an `ack` for an unknown id, an
 *   `error` that names no request and no watched stream); ignored.
 * - `rune_gap`: a rune that does not follow the last seq seen; the client resubscribes from that seq.
 * - `unknown_machine` (also a server code): a rune of a machine the client does not know, so it
 *   cannot fold it; that stream's `state$` fails, its `runes$` carries on.
 * - `invalid_message` (also a server code): a spawn or dispatch that is not a valid protocol
 *   message (or not JSON-serialisable); it was never sent.
 * - `unauthorized`: the server closed the connection with 4001, its credential revoked
 *   (`server.reauthorize()`). The client does not reconnect with it: it ends, failing its
 *   requests and streams with this code; create a client with a new token.
 */
export type ClientErrorCode = ProtocolErrorCode | 'connection_lost' | 'invalid_server_message' | 'unexpected_message' | 'rune_gap' | 'unauthorized';

/** An error of the runestream client: a stable `code` to branch on, and a message naming what was wrong. */
export class ClientError extends Error {
  override readonly name = 'ClientError';

  constructor(
    readonly code: ClientErrorCode,
    message: string,
    /** The stream the error concerns, when it concerns one. */
    readonly stream?: string,
  ) {
    super(message);
  }
}
