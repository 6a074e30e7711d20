import { z } from 'zod';
import { Rune } from '../reducers/rune.js';
import { isStorableText } from '../reducers/value-limits.js';

/**
 * The runestream wire protocol: every WebSocket message, in both directions, is one JSON object
 * (a text frame) matching one of these schemas. The schemas are the single source of the types.
 *
 * Client -> server:
 * - `spawn`: create `stream` as an instance of `machine`; answered by `ack` (seq 1) or `error`.
 * - `dispatch`: send `event` to `stream`; answered by `ack` with the rune's seq once it is durable,
 *   or `error` naming why nothing was appended.
 * - `subscribe`: without `afterSeq`, a `snapshot` of the current state, then a `rune` for every
 *   change; with `afterSeq`, every stored rune after it, then live ones (no gap, no duplicate).
 *   Where the runes after `afterSeq` are no longer stored, a `snapshot` comes first instead.
 * - `unsubscribe`: stop receiving `stream`.
 *
 * Server -> client:
 * - `snapshot`: the stream's state as of `seq`, and beside it `derived`, the view its machine's
 *   `derive` computes from it (if it has one). May also come mid-subscription (a client too slow
 *   for every rune is sent the latest state instead); the runes that follow continue after `seq`.
 * - `rune`: one durable rune of a subscribed stream, in seq order.
 * - `ack`: the request `id` succeeded; `seq` is the seq of the rune it appended.
 * - `error`: a request failed (`id` when it had one, `stream` when it named one), with a stable
 *   `code` (see {@link ProtocolErrorCode}) and a message naming what was wrong.
 */

/** Storable as it is: no NUL character (PostgreSQL refuses it) and no lone surrogate (stored as UTF-8, it would come back as another id). */
const StreamId = z.string().min(1).max(256).refine(isStorableText, 'must have no NUL character (\\u0000) and no lone surrogate');
/** A request id chosen by the client, echoed in its `ack` or `error`. */
const RequestId = z.union([z.string().min(1).max(128), z.number().int()]);

export const SpawnMessage = z.strictObject({
  op: z.literal('spawn'),
  id: RequestId,
  stream: StreamId,
  machine: z.string().min(1),
  input: z.unknown().optional(),
});
export type SpawnMessage = z.infer<typeof SpawnMessage>;

export const DispatchMessage = z.strictObject({
  op: z.literal('dispatch'),
  id: RequestId,
  stream: StreamId,
  event: z.looseObject({ type: z.string() }),
});
export type DispatchMessage = z.infer<typeof DispatchMessage>;

export const SubscribeMessage = z.strictObject({
  op: z.literal('subscribe'),
  stream: StreamId,
  afterSeq: z.number().int().nonnegative().optional(),
});
export type SubscribeMessage = z.infer<typeof SubscribeMessage>;

export const UnsubscribeMessage = z.strictObject({
  op: z.literal('unsubscribe'),
  stream: StreamId,
});
export type UnsubscribeMessage = z.infer<typeof UnsubscribeMessage>;

/** Every message a client may send. */
export const ClientMessage = z.discriminatedUnion('op', [SpawnMessage, DispatchMessage, SubscribeMessage, UnsubscribeMessage]);
export type ClientMessage = z.infer<typeof ClientMessage>;

/** The ops a client may send, for error messages that list them. */
export const CLIENT_OPS = ['spawn', 'dispatch', 'subscribe', 'unsubscribe'] as const;

export const SnapshotMessage = z.strictObject({
  op: z.literal('snapshot'),
  stream: StreamId,
  seq: z.number().int().nonnegative(),
  state: z.unknown(),
  /** The state's derived view, when its machine has a `derive` (an agent session's UI flags): computed, never stored. */
  derived: z.unknown().optional(),
});
export type SnapshotMessage = z.infer<typeof SnapshotMessage>;

export const RuneMessage = z.strictObject({
  op: z.literal('rune'),
  rune: Rune,
});
export type RuneMessage = z.infer<typeof RuneMessage>;

export const AckMessage = z.strictObject({
  op: z.literal('ack'),
  id: RequestId,
  seq: z.number().int().positive(),
});
export type AckMessage = z.infer<typeof AckMessage>;

/**
 * Stable error codes. The engine's rejection codes (`unknown_stream`, `invalid_stream`,
 * `invalid_layout`, `agent_kind_conflict`, `stream_exists`, `unknown_machine`, `newer_version`, `invalid_input`, `invalid_origin` (an identity id the engine cannot record: over 256 characters), `unknown_event`, `invalid_event`,
 * `terminal_state`, `not_allowed`, `sealed`, `held`, `contention`, `closed`, and the input limits `too_deep`, `string_too_long`,
 * `too_many_keys`, `array_too_long`, and `invalid_string`: a NUL or a lone surrogate no store keeps) pass through as they are; the server adds:
 * - `invalid_json`: the frame is not JSON.
 * - `invalid_message`: JSON, but not a message of this protocol (the message names the field).
 * - `unknown_op`: an `op` this server does not know.
 * - `binary_frame`: a binary frame; the protocol is text only.
 * - `frame_too_large`: a frame over the server's `maxFrameBytes`.
 * - `rate_limited`: more dispatches than the connection's rate limit allows.
 * - `too_many_subscriptions`: a subscribe past the connection's `maxSubscriptions`.
 * - `too_many_requests`: a request past the connection's `maxRequestsInFlight` (requests not yet answered).
 * - `forbidden`: the authorization hook refused this stream to this connection (or, from
 *   `server.reauthorize()`, no longer allows a live subscription to it).
 * - `internal`: the server failed (a store error, ...); nothing was appended.
 * - `checksum_mismatch`, `missing_segment`, `invalid_segment`, `invalid_manifest`: replaying a
 *   subscribed stream's archived runes found its archive damaged (the message names the segment);
 *   the subscription ends, and the server logs it.
 * - `chain_broken`: a stored rune of the stream does not match its hash chain (its bytes changed
 *   after it was written); the stream is refused (subscribe, dispatch), other streams carry on.
 * - `corrupt_file`: reading the stream met a page its SQLite file has damaged; refused the same way.
 */
export const PROTOCOL_ERROR_CODES = [
  'invalid_json',
  'invalid_message',
  'unknown_op',
  'binary_frame',
  'frame_too_large',
  'rate_limited',
  'too_many_subscriptions',
  'too_many_requests',
  'forbidden',
  'internal',
  'unknown_stream',
  'invalid_stream',
  'invalid_layout',
  'agent_kind_conflict',
  'stream_exists',
  'unknown_machine',
  'newer_version',
  'invalid_input',
  'invalid_origin',
  'unknown_event',
  'invalid_event',
  'terminal_state',
  'not_allowed',
  'sealed',
  'held',
  'contention',
  'closed',
  'too_deep',
  'string_too_long',
  'too_many_keys',
  'array_too_long',
  'invalid_string',
  'checksum_mismatch',
  'missing_segment',
  'invalid_segment',
  'invalid_manifest',
  'chain_broken',
  'corrupt_file',
] as const;
export const ProtocolErrorCode = z.enum(PROTOCOL_ERROR_CODES);
export type ProtocolErrorCode = z.infer<typeof ProtocolErrorCode>;

export const ErrorMessage = z.strictObject({
  op: z.literal('error'),
  id: RequestId.optional(),
  stream: StreamId.optional(),
  code: ProtocolErrorCode,
  message: z.string(),
});
export type ErrorMessage = z.infer<typeof ErrorMessage>;

/** Every message a server may send. */
export const ServerMessage = z.discriminatedUnion('op', [SnapshotMessage, RuneMessage, AckMessage, ErrorMessage]);
export type ServerMessage = z.infer<typeof ServerMessage>;

/**
 * WebSocket close codes the server uses, besides the standard ones (1000 normal, 1001 going away,
 * 1009 a frame over the hard limit).
 * - 4001 `unauthorized`: `server.reauthorize()` found that the connection's credential no longer
 *   verifies (a missing or wrong one is refused with HTTP 401 before the upgrade).
 * - 4002 `message_timeout`: a message was started and not finished within `messageTimeoutMs`.
 * - 4003 `inbound_limit`: the connection's unfinished message would have put the bytes buffered
 *   across all connections over `maxInboundBytes`.
 * - 4008 `slow_client`: the connection's outbound buffer passed its high-water mark and the
 *   server's policy for slow clients is to close, or it stayed over it past a heartbeat.
 */
export const CLOSE_CODES = { unauthorized: 4001, messageTimeout: 4002, inboundLimit: 4003, slowClient: 4008 } as const;
