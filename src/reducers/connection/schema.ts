import { z } from 'zod';

/** Seed 002 "StreamingService (WebSocket) Connection State"; no state is terminal. */
export const ConnectionStateName = z.enum(['DISCONNECTED', 'CONNECTING', 'OPEN', 'SUBSCRIBED', 'RECONNECTING']);
export type ConnectionStateName = z.infer<typeof ConnectionStateName>;

/** The connection's state: its state name, its open subscriptions and its reconnect attempt. */
export const ConnectionState = z.object({
  value: ConnectionStateName,
  /** Streams subscribed on the open socket; SUBSCRIBED exactly when it is above 0. */
  subscriptions: z.number().int().nonnegative(),
  /** Reconnects scheduled since the last successful handshake; the backoff effect reads it. */
  attempt: z.number().int().nonnegative(),
  /** The error that dropped the socket last, if it dropped with one; cleared by a close or a handshake. */
  error: z.string().optional(),
});
export type ConnectionState = z.infer<typeof ConnectionState>;

/** The diagram's edges as events; `stream` names which of the socket's streams is (un)subscribed. */
export const ConnectionEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('open_socket') }),
  z.object({ type: z.literal('handshake_success') }),
  z.object({ type: z.literal('subscribe'), stream: z.string().min(1).optional() }),
  z.object({ type: z.literal('unsubscribe'), stream: z.string().min(1).optional() }),
  z.object({ type: z.literal('close') }),
  z.object({ type: z.literal('error'), error: z.string().optional() }),
  z.object({ type: z.literal('schedule_reconnect') }),
  z.object({ type: z.literal('reconnect') }),
]);
export type ConnectionEvent = z.infer<typeof ConnectionEvent>;
