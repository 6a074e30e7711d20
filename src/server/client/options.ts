import { asyncScheduler, type SchedulerLike } from 'rxjs';
import type { AnyMachine } from '../../reducers/machine.js';
import { machines as builtInMachines } from '../../reducers/machines.js';
import { resolveBackoff, type BackoffOptions } from './backoff.js';
import { resolveWebSocket, socketUrl, type WebSocketConstructor } from './web-socket.js';

/** Options of {@link createClient}; only `url` is required. */
export interface ClientOptions {
  /** The server's WebSocket URL, `ws://host:port` or `wss://host:port`. Required. */
  url: string;
  /** The server's access token, sent as `?token=` (browsers cannot set headers). Default: none. */
  token?: string;
  /**
   * The WebSocket class. Default: `globalThis.WebSocket` (browsers, Node 22+). In Node 20 pass
   * `WebSocket` from `ws`; with neither, `createClient` throws a TypeError.
   */
  WebSocket?: WebSocketConstructor;
  /** Where the reconnect backoff timers run (a `VirtualTimeScheduler` in tests). Default: rxjs `asyncScheduler`. */
  scheduler?: SchedulerLike;
  /**
   * The reconnect backoff: exponential with full jitter, the delay before attempt n being
   * `random() * min(maxMs, baseMs * 2 ** (n - 1))`. Default: `{ baseMs: 500, maxMs: 30000 }`.
   */
  backoff?: BackoffOptions;
  /** The jitter's source of randomness, returning a number in [0, 1). Default: `Math.random`. */
  random?: () => number;
  /**
   * The machines that fold each stream's runes into its `state$`, by id (a rune names its
   * machine). Default: the built-in registry of every seed machine (`machines`).
   */
  machines?: Readonly<Record<string, AnyMachine>>;
}

/** The options with every default filled in and every value checked. */
export interface ResolvedClientOptions {
  /** `url` with the token in its query. */
  readonly socketUrl: string;
  readonly WebSocket: WebSocketConstructor;
  readonly scheduler: SchedulerLike;
  readonly backoff: Required<BackoffOptions>;
  readonly random: () => number;
  readonly machines: Readonly<Record<string, AnyMachine>>;
}

/** Fills in the defaults and checks the options; a bad one throws a TypeError or RangeError naming it. */
export function resolveClientOptions(options: ClientOptions): ResolvedClientOptions {
  if (typeof options !== 'object' || options === null) throw new TypeError('createClient(options): options must be an object with at least `url`');
  const { url, token, scheduler = asyncScheduler, random = Math.random, machines = builtInMachines } = options;
  if (typeof url !== 'string') throw new TypeError(`options.url must be a ws:// or wss:// URL string, got ${typeof url}`);
  if (token !== undefined && typeof token !== 'string') throw new TypeError(`options.token must be a string, got ${typeof token}`);
  if (typeof random !== 'function') throw new TypeError(`options.random must be a function returning a number in [0, 1), got ${typeof random}`);
  return {
    socketUrl: socketUrl(url, token),
    WebSocket: resolveWebSocket(options.WebSocket),
    scheduler,
    backoff: resolveBackoff(options.backoff),
    random,
    machines,
  };
}
