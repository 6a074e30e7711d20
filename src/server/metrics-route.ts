import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { Counter, Gauge } from 'prom-client';
import type { RunestreamMetrics } from '../effects/metrics/metrics.js';
import { SERVER_CHANNELS, type SlowClientReport } from './diagnostics.js';
import { replyError } from './http-reply.js';
import { compileRoute, type CompiledRoute } from './routes.js';

/** The server's families' names: removed from the registry when the server closes. */
const SERVER_FAMILIES = ['runestream_ws_connections', 'runestream_ws_subscriptions', 'runestream_sse_readers', 'runestream_ws_slow_clients_total'];

/** What the server's metric families read at scrape time. */
export interface ServerCounts {
  /** Open WebSocket connections. */
  webSockets(): number;
  /** Streams subscribed to, over every WebSocket connection. */
  subscriptions(): number;
  /** Open SSE responses. */
  sseReaders(): number;
  /** Whether the server is closing: a scrape then gets 503. */
  closing(): boolean;
}

/** The server's part of the metrics: its families on the metrics' registry, and the `GET /metrics` route. */
export interface ServerMetrics {
  readonly route: CompiledRoute;
  /** Removes the server's families from the registry and stops listening for slow clients. */
  stop(): void;
}

/**
 * Adds the server's families to `metrics.registry` (read when scraped, nothing on the hot path
 * but a slow-client count) and makes the `GET /metrics` route: the registry in the Prometheus
 * text format (prom-client's `registry.metrics()`, `registry.contentType`), or 503 `unavailable`
 * while the server closes, so a scrape then is answered at once rather than left hanging.
 */
export function serverMetrics(metrics: RunestreamMetrics, counts: ServerCounts): ServerMetrics {
  const { registry } = metrics;
  const registers = [registry];
  const gauge = (name: string, help: string, read: () => number): void => {
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(read());
      },
    });
  };
  gauge('runestream_ws_connections', 'Open WebSocket connections.', counts.webSockets);
  gauge('runestream_ws_subscriptions', 'Streams subscribed to over WebSocket, summed over the connections.', counts.subscriptions);
  gauge('runestream_sse_readers', 'Open SSE responses (GET /streams/:stream/events).', counts.sseReaders);
  const slowClients = new Counter({
    name: 'runestream_ws_slow_clients_total',
    help: 'WebSocket clients past maxBufferedBytes, by the policy applied (coalesce: its runes dropped for a fresh snapshot; close: disconnected).',
    labelNames: ['policy'] as const,
    registers,
  });
  // Both policies exist from the start, so a scrape shows 0 rather than no series.
  slowClients.inc({ policy: 'coalesce' }, 0);
  slowClients.inc({ policy: 'close' }, 0);
  const onSlowClient = (message: unknown): void => slowClients.inc({ policy: (message as SlowClientReport).policy });
  subscribe(SERVER_CHANNELS.slowClient, onSlowClient);

  const route = compileRoute(
    {
      method: 'GET',
      path: '/metrics',
      handler: async (_req, res) => {
        if (counts.closing()) return replyError(res, 503, 'unavailable', 'the server is closing; scrape again once it is back');
        const text = await registry.metrics();
        res.writeHead(200, { 'content-type': registry.contentType, 'content-length': Buffer.byteLength(text) });
        res.end(text);
      },
    },
    'the built-in route',
  );
  return {
    route,
    stop: () => {
      unsubscribe(SERVER_CHANNELS.slowClient, onSlowClient);
      for (const name of SERVER_FAMILIES) registry.removeSingleMetric(name);
    },
  };
}
