import { createServer as createHttpServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { interval, type Subscription } from 'rxjs';
import { WebSocketServer } from 'ws';
import { AccessGate, urlHost } from './access.js';
import { ClientConnection } from './connection.js';
import { connectionChannel, type ConnectionReport } from './diagnostics.js';
import { Fanout } from './fanout.js';
import type { HttpRefusal } from './http-reply.js';
import { InboundBudget, InboundGuard } from './inbound-guard.js';
import { resolveServerOptions, type ServerOptions } from './options.js';
import { serverMetrics } from './metrics-route.js';
import { createInspector } from './inspector/inspector.js';
import { builtInRoutes, checkUserRoutes, handleRequest, handleRoute, type RouteDeps } from './routes.js';
import { SseEndpoint } from './sse.js';

/** A running server: where it listens, and how to stop it. */
export interface RunestreamServer {
  /** The WebSocket URL, `ws://host:port` (any path is accepted). */
  readonly url: string;
  /** The HTTP URL, `http://host:port`: `/healthz`, `/streams/:stream/events` and the `routes` option's. */
  readonly httpUrl: string;
  /** The port it listens on (the real one when `port` was 0). */
  readonly port: number;
  /** Open WebSocket connections plus open SSE responses. */
  readonly connections: number;
  /** Closes every WebSocket (1001) and SSE response, then the listener. Never closes the engine. */
  close(): Promise<void>;
  /**
   * Applies a revocation: verifies every open connection's credential again (one that no longer
   * verifies is closed with 4001 `unauthorized`, an SSE response ended) and asks `authorize`
   * again for every live subscription and SSE response (each refused is cut: the client gets a
   * `forbidden` error naming the stream and none of its later runes). Resolves once applied.
   */
  reauthorize(): Promise<void>;
  /**
   * Answers `req` if its path is one of runestream's routes (built-in or `routes`) and returns
   * true; returns false, answering nothing, for any other path (and once closed), so a host app
   * attached to with the `server` option answers it itself.
   */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
}

const CLOSING: HttpRefusal = { status: 503, code: 'unavailable', message: 'the server is closing' };

/** Refuses an upgrade with a plain HTTP response, before any WebSocket exists (as `ws` does). */
function refuseUpgrade(socket: Duplex, { status, code, message, headers }: HttpRefusal): void {
  const body = JSON.stringify({ ok: false, code, message });
  const head = Object.entries({ 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), connection: 'close', ...headers })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.once('finish', () => socket.destroy());
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${head}\r\n${body}`);
}

const listen = (server: Server, port: number, host: string): Promise<void> =>
  new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });

/**
 * Serves an engine's streams over WebSocket (the protocol of `protocol.ts`) and HTTP (SSE, a
 * health check and the `routes` option's routes). Resolves once it listens; with `server`, it
 * attaches to that listening `node:http` server instead (its upgrades, and the requests the host
 * app passes to `handle`).
 *
 * 1. WebSocket: every frame is one JSON message. `spawn` and `dispatch` are answered by `ack`
 *    once durable or by `error`; `subscribe` sends a `snapshot` (or the runes after `afterSeq`),
 *    then every rune. Each stream has one shared feed: a rune is serialized once, whatever the
 *    number of clients.
 * 2. Access: the `Origin` (and, with no credential configured, the `Host`) must be the server's
 *    own or allowed, else HTTP 403; with `token` or `verify`, every request but a bare
 *    `GET /healthz` must present a credential that verifies, else HTTP 401, before any upgrade;
 *    `authorize` decides per stream what the verified identity may see and drive, and
 *    `reauthorize()` applies a revocation to open connections.
 * 3. Limits: `maxFrameBytes`, `maxPayloadBytes`, `dispatchRate`, `maxSubscriptions` and
 *    `maxRequestsInFlight` per connection, `maxBufferedBytes` with the `slowClient` policy,
 *    `maxInboundBytes` across connections, and the deadlines `handshakeTimeoutMs` and
 *    `messageTimeoutMs`. Bad input gets an `error` or a close code; it never reaches another
 *    client or the log.
 * 4. HTTP: a table of routes (see `routes.ts`), each behind the access checks; 404 `not_found`,
 *    405 `method_not_allowed` with `Allow`, 413 `body_too_large` past `maxBodyBytes`.
 *
 * ## Example
 * ```ts
 * import { createEngine } from 'runestream';
 * import { createServer } from 'runestream/server';
 * const engine = createEngine();
 * const server = await createServer({ engine, port: 0 });
 * console.log(server.url); // Logs: ws://127.0.0.1:...
 * await server.close();
 * await engine.close();
 * ```
 */
export async function createServer(options: ServerOptions): Promise<RunestreamServer> {
  const resolved = resolveServerOptions(options);
  const { engine, host, port, maxPayloadBytes, heartbeatMs, scheduler, handshakeTimeoutMs, messageTimeoutMs, server: attachedTo } = resolved;
  const sse = new SseEndpoint(resolved);
  const gate = new AccessGate(host, resolved.allowedOrigins, resolved.verify);
  const clients = new Set<ClientConnection>();
  const connections = (): number => clients.size + sse.size;
  let closing: Promise<void> | undefined;
  const metrics =
    resolved.metrics === undefined
      ? undefined
      : serverMetrics(resolved.metrics, {
          webSockets: () => clients.size,
          subscriptions: () => [...clients].reduce((sum, client) => sum + client.subscriptionCount, 0),
          sseReaders: () => sse.size,
          closing: () => closing !== undefined,
        });
  const inspector = resolved.inspector === undefined ? undefined : createInspector({ ...resolved.inspector, engine, authorize: resolved.authorize, scheduler });
  const builtIns = [...builtInRoutes({ sse, connections }), ...(metrics === undefined ? [] : [metrics.route]), ...(inspector?.routes ?? [])];
  const allRoutes = [...builtIns, ...checkUserRoutes(resolved.routes, builtIns)];
  // One budget for what clients have sent and not finished: WebSocket messages and request bodies.
  const inboundBudget = new InboundBudget(resolved.maxInboundBytes);
  const body = { maxBodyBytes: resolved.maxBodyBytes, budget: inboundBudget, timeoutMs: messageTimeoutMs, scheduler };
  const routeDeps: RouteDeps = { gate, body, connections };
  const fanout = new Fanout(engine);
  let nextId = 1;

  const http =
    attachedTo ??
    createHttpServer(
      {
        // Covers a socket that sends nothing at all, or half a request head (checked by experiment,
        // Node 20): it is answered 408 and closed. The check runs every connectionsCheckingInterval.
        headersTimeout: handshakeTimeoutMs,
        requestTimeout: Math.max(handshakeTimeoutMs, 300_000), // Node's default; never below headersTimeout
        connectionsCheckingInterval: Math.min(1000, Math.max(10, Math.floor(handshakeTimeoutMs / 4))),
      },
      (req, res) => handleRequest(routeDeps, allRoutes, req, res),
    );
  // No server of its own: the upgrade is checked here first, so a refusal is a plain HTTP reply.
  // allowSynchronousEvents false: one message per connection per turn of the event loop, so a
  // client pipelining expensive frames cannot hold the loop while others wait.
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: maxPayloadBytes,
    clientTracking: false,
    perMessageDeflate: false,
    allowSynchronousEvents: false,
  });

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on('error', () => socket.destroy());
    if (closing !== undefined) return refuseUpgrade(socket, CLOSING);
    gate
      .admit(req)
      .then((admission) => {
        if (!admission.ok) return refuseUpgrade(socket, admission);
        if (socket.destroyed) return;
        if (closing !== undefined) return refuseUpgrade(socket, CLOSING);
        wss.handleUpgrade(req, socket, head, (ws) => {
          new InboundGuard(ws, socket, inboundBudget, messageTimeoutMs, scheduler);
          const client = new ClientConnection(nextId++, ws, admission.request, fanout, resolved);
          clients.add(client);
          const report = (event: ConnectionReport['event']): void => {
            if (connectionChannel.hasSubscribers)
              connectionChannel.publish({ connection: client.id, event, identity: admission.request.identity.id } satisfies ConnectionReport);
          };
          report('opened');
          // closedPromise never rejects
          void client.closedPromise.then(() => {
            clients.delete(client);
            report('closed');
          });
        });
      })
      // A throw while admitting one upgrade ends that socket; unhandled, it would end the process.
      .catch(() => socket.destroy());
  };
  http.on('upgrade', onUpgrade);

  let heartbeat: Subscription | undefined;
  if (heartbeatMs > 0) {
    heartbeat = interval(heartbeatMs, scheduler).subscribe(() => {
      for (const client of clients) client.heartbeat();
      sse.heartbeat();
    });
  }

  if (attachedTo === undefined) {
    try {
      await listen(http, port, host);
    } catch (error) {
      heartbeat?.unsubscribe();
      metrics?.stop();
      http.off('upgrade', onUpgrade);
      throw error;
    }
  }
  const actualPort = (http.address() as AddressInfo).port;
  gate.listening(actualPort);

  const shutDown = async (): Promise<void> => {
    heartbeat?.unsubscribe();
    metrics?.stop();
    // An attached server is the host app's: only runestream's own part of it stops.
    const listenerClosed = attachedTo === undefined ? new Promise<void>((resolve) => http.close(() => resolve())) : undefined;
    sse.closeAll();
    inspector?.close();
    await Promise.all([...clients].map((client) => client.shutdown()));
    wss.close();
    if (attachedTo !== undefined) return void http.off('upgrade', onUpgrade);
    http.closeAllConnections(); // idle keep-alive sockets
    await listenerClosed;
  };

  return {
    url: `ws://${urlHost(host)}:${actualPort}`,
    httpUrl: `http://${urlHost(host)}:${actualPort}`,
    port: actualPort,
    get connections() {
      return connections();
    },
    close: () => (closing ??= shutDown()),
    reauthorize: async () => {
      await Promise.all([...[...clients].map((client) => client.reauthorize(gate)), sse.reauthorize(gate)]);
    },
    handle: (req, res) => closing === undefined && handleRoute(routeDeps, allRoutes, req, res),
  };
}
