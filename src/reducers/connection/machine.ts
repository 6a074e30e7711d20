import { z } from 'zod';
import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { ConnectionEvent, ConnectionState, ConnectionStateName } from './schema.js';

type S = ConnectionState;
type E = ConnectionEvent;

/** A dropped socket takes every subscription with it, and says why if it dropped with an error. */
const dropped = (_: S, e: E): Partial<S> => ({
  subscriptions: 0,
  error: e.type === 'error' ? e.error : undefined,
});

/** Seed 002 section 4, edge for edge, with SUBSCRIBED as a child of OPEN and several streams per socket. */
const table: readonly Row<S, E>[] = [
  { from: 'DISCONNECTED', on: 'open_socket', to: 'CONNECTING' },
  { from: 'CONNECTING', on: 'handshake_success', to: 'OPEN', assign: () => ({ attempt: 0, error: undefined }) },
  { from: 'OPEN', on: 'subscribe', to: 'SUBSCRIBED', assign: (s) => ({ subscriptions: s.subscriptions + 1 }) },
  { from: 'OPEN', on: 'close', to: 'DISCONNECTED', assign: dropped },
  { from: 'OPEN', on: 'error', to: 'DISCONNECTED', assign: dropped },
  {
    from: 'SUBSCRIBED',
    on: 'unsubscribe',
    to: 'OPEN',
    when: (s) => s.subscriptions <= 1,
    label: 'last subscription',
    assign: () => ({ subscriptions: 0 }),
  },
  { from: 'DISCONNECTED', on: 'schedule_reconnect', to: 'RECONNECTING', assign: (s) => ({ attempt: s.attempt + 1 }) },
  { from: 'RECONNECTING', on: 'reconnect', to: 'CONNECTING' },
  // SUBSCRIBED is a child of OPEN (DESIGN.md): it inherits OPEN's close / error edges.
  { from: 'SUBSCRIBED', on: 'close', to: 'DISCONNECTED', assign: dropped, source: 'design', note: 'SUBSCRIBED is a child of OPEN' },
  { from: 'SUBSCRIBED', on: 'error', to: 'DISCONNECTED', assign: dropped, source: 'design', note: 'SUBSCRIBED is a child of OPEN' },
  {
    from: 'SUBSCRIBED',
    on: 'subscribe',
    assign: (s) => ({ subscriptions: s.subscriptions + 1 }),
    source: 'extension',
    note: 'one socket carries several streams: a further subscribe keeps the socket SUBSCRIBED',
  },
  {
    from: 'SUBSCRIBED',
    on: 'unsubscribe',
    when: (s) => s.subscriptions > 1,
    label: 'other subscriptions remain',
    assign: (s) => ({ subscriptions: s.subscriptions - 1 }),
    source: 'extension',
    note: 'unsubscribing one stream of several must not drop the others',
  },
  {
    from: 'RECONNECTING',
    on: 'close',
    to: 'DISCONNECTED',
    source: 'extension',
    note: 'a client closed while it waits to reconnect ends disconnected, not waiting forever',
  },
  {
    from: 'CONNECTING',
    on: 'close',
    to: 'DISCONNECTED',
    assign: dropped,
    source: 'extension',
    note: 'a failed handshake must not leave the client stuck in CONNECTING',
  },
  {
    from: 'CONNECTING',
    on: 'error',
    to: 'DISCONNECTED',
    assign: dropped,
    source: 'extension',
    note: 'a failed handshake must not leave the client stuck in CONNECTING',
  },
];

/**
 * The client's WebSocket connection (seed 002): connect, handshake, subscribe to streams, and
 * reconnect through the scheduler after the socket drops. `attempt` counts the reconnects scheduled
 * since the last successful handshake, for the backoff.
 *
 * @example
 * ```ts
 * import { connection } from 'runestream';
 * let s = connection.initial();                                   // { value: 'DISCONNECTED', subscriptions: 0, attempt: 0 }
 * s = connection.transition(s, { type: 'open_socket' });          // CONNECTING
 * s = connection.transition(s, { type: 'handshake_success' });    // OPEN
 * s = connection.transition(s, { type: 'subscribe', stream: 'chat-1' });
 * s = connection.transition(s, { type: 'subscribe', stream: 'chat-2' });
 * s = connection.transition(s, { type: 'error', error: 'ECONNRESET' });
 * console.log(s); // Logs: { value: 'DISCONNECTED', subscriptions: 0, attempt: 0, error: 'ECONNRESET' }
 * ```
 */
export const connection = defineMachine<S, E>({
  id: 'connection',
  states: ConnectionStateName.options,
  terminal: [],
  events: eventTypesOf(ConnectionEvent),
  schemas: { state: ConnectionState, event: ConnectionEvent, input: z.void() },
  initial: () => ({ value: 'DISCONNECTED', subscriptions: 0, attempt: 0 }),
  table,
});
