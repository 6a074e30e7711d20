/**
 * runestream/client: a client of a runestream server, for Node and browsers. It imports only
 * rxjs, zod, the machines and the wire protocol: nothing Node-only, no `ws`, no SQLite.
 */
export { createClient, type ClientEvent, type RunestreamClient } from './client.js';
export { ClientError, type ClientErrorCode } from './errors.js';
export type { ClientOptions } from './options.js';
export { backoffDelay, DEFAULT_BACKOFF, type BackoffOptions } from './backoff.js';
export type { WebSocketConstructor, WebSocketLike } from './web-socket.js';
export type { ConnectionStateName } from '../../reducers/connection/index.js';
export type { Rune } from '../../reducers/rune.js';
export type { AnyMachine } from '../../reducers/machine.js';
