import { asyncScheduler, type SchedulerLike } from 'rxjs';
import type { Server } from 'node:http';
import type { Engine } from '../streams/engine.js';
import { isLoopbackHost, originOf, tokenVerify, type Authorize, type Identity, type Verify } from './access.js';
import type { DispatchMessage, SpawnMessage } from './protocol.js';
import type { Route } from './routes.js';
import type { InspectorSettings } from './inspector/inspector.js';
import type { Rune } from '../reducers/rune.js';
import type { RunestreamMetrics } from '../effects/metrics/metrics.js';

/**
 * The text an agent streamed before a stream stopped, for the `partial_response` of seed 000's
 * SSE `stopped` event, given the rune that stopped it (`''`: none). `chatPartialResponse` from
 * `runestream/agents` is the one for chat actors.
 */
export type PartialResponse = (stopped: Rune) => Promise<string>;

/** What the server does with a client whose outbound buffer passes `maxBufferedBytes`. */
export type SlowClientPolicy = 'coalesce' | 'close';

/** A token bucket: `burst` dispatches at once, refilled at `perSecond`. */
export interface DispatchRate {
  readonly perSecond: number;
  readonly burst: number;
}

/**
 * Told of each spawn and dispatch a client sends, once `authorize` allowed it and just before it
 * reaches the engine, with who sends it; what it returns, if a function, is told whether the
 * engine accepted it. Runes do not record who sent them: this is how a per-identity limit knows.
 */
export type OnDrive = (identity: Identity, message: SpawnMessage | DispatchMessage) => ((accepted: boolean) => void) | undefined;

/** Options of {@link createServer}. Only `engine` is required; each other one is documented with its default. */
export interface ServerOptions {
  /** The engine whose streams the server serves. Required. The server never closes it. */
  engine: Engine;
  /**
   * The interface to listen on. Default `'127.0.0.1'`. Without a `token` or `verify`, only a
   * loopback host (`127.0.0.1`, `::1`, `localhost`) is allowed: an open server on the network is
   * refused.
   */
  host?: string;
  /** The TCP port. Default `7070`; `0` picks any free port (see `RunestreamServer.port`). */
  port?: number;
  /**
   * A shared secret every WebSocket and HTTP request must present, as `Authorization: Bearer T`
   * or `?token=T` (browsers cannot set headers on a WebSocket); else HTTP 401, before any
   * upgrade. A shorthand for a `verify` that compares it in constant time and yields the
   * identity `{id: 'token'}`; setting both is a TypeError. Default: none.
   */
  token?: string;
  /**
   * Turns the credential a request presents (`{token?, remoteAddress?, headers}`, the token from
   * `Authorization: Bearer T` or `?token=T`) into an authenticated {@link Identity}, which
   * `authorize` receives; `undefined` is HTTP 401 before any upgrade (a throw: 500). Asked once
   * per connection or SSE request, and again by `server.reauthorize()`. Default: none; with
   * neither `token` nor `verify` every request is `{id: 'anonymous'}` and the host must be loopback.
   */
  verify?: Verify;
  /**
   * Decides which streams a connection may `see` (subscribe, SSE), `drive` (spawn, dispatch)
   * and `approve` (dispatch an approval's answer: `approved`, `denied`, ... see `APPROVAL_EVENTS`;
   * AG-UI's `resume`), from `request.identity`; its 4th argument says what a request does:
   * `{machine}` for a spawn, `{event}` (the type) for a dispatch or an approval. Asked on every
   * such request, and again for every live subscription by `server.reauthorize()`. A refusal is
   * the error `forbidden`, with the same message whether or not the stream exists. Default:
   * allow all.
   */
  authorize?: Authorize;
  /**
   * The machines (by id) clients may spawn over the WebSocket; a spawn of any other is refused
   * with `forbidden` naming the machine, before `authorize` is asked. The server's own spawns
   * (an AG-UI run's agent, say) are not limited. Default: every machine the engine hosts
   * (`runestream serve` passes its `spawnable`, which leaves out `agent-registration` unless the
   * configuration lets clients register).
   */
  spawnable?: readonly string[];
  /** A text frame larger than this gets the error `frame_too_large`; the connection stays open. Default 256 KiB. */
  maxFrameBytes?: number;
  /** `ws`'s own hard limit (`maxPayload`): a larger message closes the connection with 1009. Must be `>= maxFrameBytes`. Default 1 MiB. */
  maxPayloadBytes?: number;
  /** A connection's outbound high-water mark (`ws` `bufferedAmount`), past which `slowClient` applies. Default 1 MiB. */
  maxBufferedBytes?: number;
  /**
   * What happens to a client past `maxBufferedBytes`. Default `'coalesce'`.
   * - `'coalesce'`: stop sending it runes and stop reading its requests; once its buffer has
   *   drained, send it a fresh `snapshot` of each of its streams and continue with the runes after it.
   * - `'close'`: close the connection with 4008 `slow_client`.
   */
  slowClient?: SlowClientPolicy;
  /**
   * Each connection's rate limit on `spawn` and `dispatch` (a token bucket timed by `scheduler`);
   * a request over it gets the error `rate_limited`. Default `{ perSecond: 1000, burst: 1000 }`.
   */
  dispatchRate?: DispatchRate;
  /**
   * Every this many ms: a WebSocket ping (a connection that has not answered the previous one,
   * nor drained its buffer since, is terminated) and an SSE comment line. `0` turns both off.
   * Default 30,000.
   */
  heartbeatMs?: number;
  /** The clock of the heartbeat, the rate limit and `messageTimeoutMs`. Default rxjs `asyncScheduler`. */
  scheduler?: SchedulerLike;
  /**
   * Origins (`https://app.example:8443`, normalized like `new URL(x).origin`) allowed besides the
   * server's own, on the WebSocket upgrade and every HTTP route but bare `/healthz`; another
   * `Origin` is refused with 403 `forbidden_origin`. Requests with no `Origin` (Node, curl) always
   * pass. The server's own origins are `http://<host>:<port>` and, on a loopback host, the same
   * with `127.0.0.1`, `localhost` and `[::1]`. `'*'` allows every origin: any web page the
   * user opens can then drive the server with the user's network position (dangerous). Default `[]`.
   */
  allowedOrigins?: readonly string[];
  /**
   * A connection that has started a message (sent part of it) and not finished it within this
   * many ms (on `scheduler`) is closed with 4002 `message_timeout`. The deadline restarts when a
   * message completes; pings and pongs do not restart it. Also an HTTP request's body: one not
   * whole within it is answered 408 `body_timeout` (and the connection closed). Default 10,000.
   */
  messageTimeoutMs?: number;
  /**
   * The bytes of unfinished messages buffered across all connections; the connection whose data
   * would put the total over it is closed with 4003 `inbound_limit`. HTTP request bodies count
   * too, from their first byte until their route's handler returns: the request whose body would
   * pass it is answered 503 `inbound_limit` (and the connection closed). Default 64 MiB.
   */
  maxInboundBytes?: number;
  /**
   * A TCP connection that has not sent a whole request head (a WebSocket upgrade or an HTTP
   * request) within this many ms is answered 408 and closed (`node:http`'s `headersTimeout`).
   * Default 10,000.
   */
  handshakeTimeoutMs?: number;
  /** The streams one connection may be subscribed to; one more gets the error `too_many_subscriptions`. Default 1,000. */
  maxSubscriptions?: number;
  /**
   * The requests of one connection received and not yet answered (a spawn or dispatch until its
   * `ack` or `error`, a subscribe until the `authorize` hook has answered, any request waiting
   * behind an asynchronous hook); one more is answered at once with `too_many_requests`. Default 256.
   */
  maxRequestsInFlight?: number;
  /**
   * More HTTP routes, each `{ method, path, handler }` (`path` with `:name` parameters). They
   * pass the same access checks as the built-in ones before their handler runs, which receives
   * `(req, res, { params, access, url, body })`. A route whose path can match the same URL as a
   * built-in one (`/healthz`, `/streams/:stream/events`), or as another route with its method,
   * is a TypeError naming both. Default `[]`.
   */
  routes?: readonly Route[];
  /**
   * A request body (every method but GET and HEAD) larger than this is answered 413
   * `body_too_large`. Bodies are also bounded together (`maxInboundBytes`) and in time
   * (`messageTimeoutMs`). Default 1 MiB.
   */
  maxBodyBytes?: number;
  /**
   * An existing, listening `node:http` server to attach to instead of listening: the server
   * takes its WebSocket upgrades (through the same access checks and limits) and answers nothing
   * else by itself; the host app passes HTTP requests to `runestream.handle(req, res)`, which
   * answers those of runestream's routes and returns false for any other. Its address stands for
   * `host` and `port` (so setting either, or `handshakeTimeoutMs`, which is then the host server's
   * `headersTimeout`, is a TypeError). `close()` leaves it open. Default: none (listen on `host`:`port`).
   */
  server?: Server;
  /**
   * Fills in `partial_response` of each SSE `stopped` event; the response holds until it answers
   * (a rejection is `''`). `runestream serve` passes `chatPartialResponse(engine)`. Default: none
   * (`''`).
   */
  partialResponse?: PartialResponse;
  /**
   * The metrics (`createMetrics()`) served at `GET /metrics` in the Prometheus text format, behind
   * the access checks; the server adds its own families to their registry (WebSocket connections,
   * subscriptions, slow clients, SSE readers) and removes them when it closes. A scrape while the
   * server closes is answered 503 `unavailable`. Default: none, and there is no `/metrics` route.
   */
  metrics?: RunestreamMetrics;
  /**
   * The live inspector at `GET /` (see `createInspector`): give the engine's store, and its
   * limits if the defaults do not suit. The page and its files are answered whatever the access
   * checks say (they hold no data, and the page asks for the token); its API is behind them and
   * shows only streams `authorize` lets the caller `see`. Default: none, and `/` is not a route.
   */
  inspector?: InspectorSettings;
  /**
   * Told who drives what (see {@link OnDrive}). `runestream serve` passes its agent CLI sessions'
   * `cliSessionOwners()`, so `maxSessionsPerIdentity` counts by the identity that started a
   * session. Default: none.
   */
  onDrive?: OnDrive;
}

/** {@link ServerOptions} with every default filled in. */
export type ResolvedServerOptions = Required<Omit<ServerOptions, 'token' | 'verify' | 'server' | 'partialResponse' | 'metrics' | 'inspector' | 'onDrive'>> & {
  readonly partialResponse: PartialResponse | undefined;
  readonly metrics: RunestreamMetrics | undefined;
  readonly inspector: InspectorSettings | undefined;
  readonly onDrive: OnDrive | undefined;
  /** The server to attach to, if any. */
  readonly server: Server | undefined;
  /** `verify`, or the `token` shorthand's; undefined when neither is set (loopback mode). */
  readonly verify: Verify | undefined;
};

const KNOWN_OPTIONS = [
  'engine',
  'host',
  'port',
  'token',
  'authorize',
  'spawnable',
  'maxFrameBytes',
  'maxPayloadBytes',
  'maxBufferedBytes',
  'slowClient',
  'dispatchRate',
  'heartbeatMs',
  'scheduler',
  'verify',
  'allowedOrigins',
  'messageTimeoutMs',
  'maxInboundBytes',
  'handshakeTimeoutMs',
  'maxSubscriptions',
  'maxRequestsInFlight',
  'routes',
  'maxBodyBytes',
  'server',
  'partialResponse',
  'metrics',
  'inspector',
  'onDrive',
] as const;

const MIB = 1024 * 1024;

const fail = (message: string): never => {
  throw new TypeError(`createServer: ${message}`);
};

const show = (value: unknown): string => (typeof value === 'string' ? JSON.stringify(value) : String(value));

const positiveInteger = (name: string, value: number): number =>
  Number.isSafeInteger(value) && value > 0 ? value : fail(`"${name}" must be a positive integer, got ${show(value)}`);

/**
 * Fills in the defaults and checks every option, throwing a TypeError that names the option (or
 * every option of a bad combination), the way `ws`'s `WebSocketServer` does.
 */
export function resolveServerOptions(options: ServerOptions): ResolvedServerOptions {
  if (typeof options !== 'object' || options === null) fail(`expected an options object with an "engine", got ${show(options)}`);
  const unknown = Object.keys(options).filter((key) => !(KNOWN_OPTIONS as readonly string[]).includes(key));
  if (unknown.length > 0) fail(`unknown option ${unknown.map((k) => `"${k}"`).join(', ')}; the options are ${KNOWN_OPTIONS.join(', ')}`);
  if (options.server !== undefined) {
    const server: unknown = options.server;
    if (typeof server !== 'object' || server === null || typeof (server as Server).address !== 'function' || typeof (server as Server).on !== 'function') {
      fail(`"server" must be a node:http Server, got ${show(server)}`);
    }
    const both = (['host', 'port', 'handshakeTimeoutMs'] as const).filter((name) => options[name] !== undefined);
    if (both.length > 0) fail(`${both.map((n) => `"${n}"`).join(', ')} and "server" are both set: an attached server's address and timeouts are the host server's`);
    const address = (server as Server).address();
    if (address === null || typeof address === 'string') fail(`"server" must be listening on a TCP port: create runestream once its listen() has called back`);
  }
  const attachedTo = options.server?.address();
  const {
    engine,
    host = typeof attachedTo === 'object' && attachedTo !== null ? attachedTo.address : '127.0.0.1',
    port = typeof attachedTo === 'object' && attachedTo !== null ? attachedTo.port : 7070,
    token,
    authorize = () => true,
    spawnable,
    maxFrameBytes = 256 * 1024,
    maxPayloadBytes = MIB,
    maxBufferedBytes = MIB,
    slowClient = 'coalesce',
    dispatchRate = { perSecond: 1000, burst: 1000 },
    heartbeatMs = 30_000,
    scheduler = asyncScheduler,
    verify,
    allowedOrigins = [],
    messageTimeoutMs = 10_000,
    maxInboundBytes = 64 * MIB,
    handshakeTimeoutMs = 10_000,
    maxSubscriptions = 1000,
    maxRequestsInFlight = 256,
    routes = [],
    maxBodyBytes = MIB,
    server,
    partialResponse,
    metrics,
    inspector,
    onDrive,
  } = options;
  if (spawnable !== undefined && (!Array.isArray(spawnable) || !spawnable.every((id) => typeof id === 'string'))) {
    fail(`"spawnable" must be an array of machine ids, got ${show(spawnable)}`);
  }
  if (
    inspector !== undefined &&
    (typeof inspector !== 'object' || inspector === null || typeof inspector.store?.heads !== 'function' || typeof inspector.store.read !== 'function')
  ) {
    fail(`"inspector" must be { store } with the engine's store, got ${show(inspector)}`);
  }
  if (onDrive !== undefined && typeof onDrive !== 'function')
    fail(`"onDrive" must be a function (identity, message) => ((accepted) => void) | undefined, got ${show(onDrive)}`);
  if (metrics !== undefined && (typeof metrics !== 'object' || metrics === null || typeof metrics.registry?.metrics !== 'function')) {
    fail(`"metrics" must be what createMetrics() returns, got ${show(metrics)}`);
  }

  if (typeof engine !== 'object' || engine === null || typeof engine.dispatch !== 'function' || typeof engine.runes$ !== 'function') {
    fail(`"engine" is required: an Engine from createEngine(), got ${show(engine)}`);
  }
  if (typeof host !== 'string' || host.length === 0) fail(`"host" must be a non-empty string, got ${show(host)}`);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) fail(`"port" must be an integer from 0 to 65535, got ${show(port)}`);
  if (token !== undefined && (typeof token !== 'string' || token.length === 0)) fail(`"token" must be a non-empty string, got ${show(token)}`);
  if (verify !== undefined && typeof verify !== 'function') fail(`"verify" must be a function (credential) => Identity | undefined, got ${show(verify)}`);
  if (token !== undefined && verify !== undefined) fail(`"token" and "verify" are both set: set one ("token" is a shorthand for a verify that compares it)`);
  if (token === undefined && verify === undefined && !isLoopbackHost(host)) {
    fail(`"host" ${show(host)} is not a loopback address and neither "token" nor "verify" is set: set one to serve the network, or use host "127.0.0.1"`);
  }
  if (typeof authorize !== 'function') fail(`"authorize" must be a function (request, stream, action) => boolean, got ${show(authorize)}`);
  positiveInteger('maxFrameBytes', maxFrameBytes);
  positiveInteger('maxPayloadBytes', maxPayloadBytes);
  positiveInteger('maxBufferedBytes', maxBufferedBytes);
  if (maxPayloadBytes < maxFrameBytes) {
    fail(`"maxPayloadBytes" (${maxPayloadBytes}) must be >= "maxFrameBytes" (${maxFrameBytes}): frames between them get "frame_too_large"`);
  }
  if (slowClient !== 'coalesce' && slowClient !== 'close') fail(`"slowClient" must be 'coalesce' or 'close', got ${show(slowClient)}`);
  if (
    typeof dispatchRate !== 'object' ||
    dispatchRate === null ||
    !(typeof dispatchRate.perSecond === 'number' && dispatchRate.perSecond > 0 && Number.isFinite(dispatchRate.perSecond)) ||
    !(Number.isSafeInteger(dispatchRate.burst) && dispatchRate.burst >= 1)
  ) {
    fail(`"dispatchRate" must be { perSecond: a positive number, burst: an integer >= 1 }, got ${JSON.stringify(dispatchRate)}`);
  }
  if (!Number.isSafeInteger(heartbeatMs) || heartbeatMs < 0) fail(`"heartbeatMs" must be a non-negative integer (0: off), got ${show(heartbeatMs)}`);
  if (typeof scheduler !== 'object' || scheduler === null || typeof scheduler.now !== 'function' || typeof scheduler.schedule !== 'function') {
    fail(`"scheduler" must be an rxjs SchedulerLike, got ${show(scheduler)}`);
  }
  if (!Array.isArray(allowedOrigins)) fail(`"allowedOrigins" must be an array of origins, got ${show(allowedOrigins)}`);
  const origins = (allowedOrigins as readonly unknown[]).map((entry) =>
    entry === '*'
      ? entry
      : ((typeof entry === 'string' ? originOf(entry) : undefined) ?? fail(`"allowedOrigins" must hold origins like "https://app.example:8443" (or '*'), got ${show(entry)}`)),
  );
  positiveInteger('messageTimeoutMs', messageTimeoutMs);
  positiveInteger('maxInboundBytes', maxInboundBytes);
  positiveInteger('handshakeTimeoutMs', handshakeTimeoutMs);
  positiveInteger('maxSubscriptions', maxSubscriptions);
  positiveInteger('maxRequestsInFlight', maxRequestsInFlight);
  positiveInteger('maxBodyBytes', maxBodyBytes);
  if (partialResponse !== undefined && typeof partialResponse !== 'function')
    fail(`"partialResponse" must be a function (stopped rune) => Promise<string>, got ${show(partialResponse)}`);
  if (!Array.isArray(routes)) fail(`"routes" must be an array of { method, path, handler }, got ${show(routes)}`);
  if (maxInboundBytes < maxPayloadBytes) {
    fail(`"maxInboundBytes" (${maxInboundBytes}) must be >= "maxPayloadBytes" (${maxPayloadBytes}): else one allowed message could be refused`);
  }
  return {
    engine,
    host,
    port,
    authorize,
    // Every machine the engine hosts unless listed.
    spawnable: spawnable === undefined ? Object.keys(engine.machines) : [...spawnable],
    maxFrameBytes,
    maxPayloadBytes,
    maxBufferedBytes,
    slowClient,
    dispatchRate,
    heartbeatMs,
    scheduler,
    verify: token === undefined ? verify : tokenVerify(token),
    allowedOrigins: origins,
    messageTimeoutMs,
    maxInboundBytes,
    handshakeTimeoutMs,
    maxSubscriptions,
    maxRequestsInFlight,
    routes,
    maxBodyBytes,
    server,
    partialResponse,
    metrics,
    inspector,
    onDrive,
  };
}
