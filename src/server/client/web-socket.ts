/**
 * The part of the WebSocket API the client uses: what the browser's `WebSocket` and the `ws`
 * package's `WebSocket` both have, so either can be passed in.
 *
 * The client only assigns the `on*` handlers, it never calls them: their parameter is `never` so
 * that the DOM's and `ws`'s own event types both fit. What the client reads from the events is
 * spelled out in {@link MessageEventLike}, {@link CloseEventLike} and {@link ErrorEventLike}.
 */
export interface WebSocketLike {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: never) => void) | null;
  onmessage: ((event: never) => void) | null;
  onclose: ((event: never) => void) | null;
  onerror: ((event: never) => void) | null;
}

/** A WebSocket class: `globalThis.WebSocket` in browsers (and Node 22+), `WebSocket` from `ws` in Node 20. */
export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** A message event: `data` is a string for a text frame (in browsers and in `ws`), anything else for a binary one. */
export interface MessageEventLike {
  readonly data: unknown;
}

/** A close event: the close code and reason (1006 and `''` when the socket dropped without a close frame). */
export interface CloseEventLike {
  readonly code: number;
  readonly reason: string;
}

/** An error event: `ws` says what failed in `message`; browsers say nothing. */
export interface ErrorEventLike {
  readonly message?: string;
}

/** The WebSocket class to use: the one given, else the global one; a TypeError saying so when there is neither. */
export function resolveWebSocket(given: WebSocketConstructor | undefined): WebSocketConstructor {
  if (given !== undefined) {
    if (typeof given !== 'function') throw new TypeError(`options.WebSocket must be a WebSocket class, got ${typeof given}`);
    return given;
  }
  const global = (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (typeof global === 'function') return global;
  throw new TypeError(
    "runestream client: options.WebSocket was not given and globalThis.WebSocket does not exist; in Node 20, pass `WebSocket` from 'ws' (import { WebSocket } from 'ws')",
  );
}

/**
 * The URL to connect to: `url` checked to be a ws: or wss: URL, with `token` as its `?token=`
 * query parameter (browsers cannot set an `Authorization` header on a WebSocket).
 */
export function socketUrl(url: string, token: string | undefined): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`options.url must be a ws:// or wss:// URL, got ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 'ws:' && parsed.protocol !== 'wss:') {
    throw new TypeError(`options.url must be a ws:// or wss:// URL, got ${JSON.stringify(url)} (protocol ${parsed.protocol})`);
  }
  if (token !== undefined) parsed.searchParams.set('token', token);
  return parsed.toString();
}
