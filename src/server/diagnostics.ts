import { channel } from 'node:diagnostics_channel';
import type { SlowClientPolicy } from './options.js';

/**
 * `node:diagnostics_channel` channels the server publishes on, for monitoring and tests. Nothing
 * is built for a channel nobody subscribes to.
 */
export const SERVER_CHANNELS = {
  /** After every frame sent to a WebSocket client: a {@link SentReport}. */
  sent: 'runestream:server:sent',
  /** A WebSocket client passed `maxBufferedBytes`: a {@link SlowClientReport}. */
  slowClient: 'runestream:server:slow-client',
  /** A WebSocket client connected or went away: a {@link ConnectionReport}. */
  connection: 'runestream:server:connection',
} as const;

/** A WebSocket connection opened (after the access checks) or closed. */
export interface ConnectionReport {
  /** The connection's number, unique within the server. */
  readonly connection: number;
  readonly event: 'opened' | 'closed';
  /** Who it is (the verified identity's id). */
  readonly identity: string;
}

/** One frame sent: its size, and what the connection's outbound buffer holds after it. */
export interface SentReport {
  /** The connection's number, unique within the server. */
  readonly connection: number;
  readonly bytes: number;
  /** `ws` `bufferedAmount` right after the send. */
  readonly bufferedAmount: number;
}

/** A connection passed the high-water mark, and what the server does about it. */
export interface SlowClientReport {
  readonly connection: number;
  readonly policy: SlowClientPolicy;
  readonly bufferedAmount: number;
}

export const sentChannel = channel(SERVER_CHANNELS.sent);
export const slowClientChannel = channel(SERVER_CHANNELS.slowClient);
export const connectionChannel = channel(SERVER_CHANNELS.connection);
