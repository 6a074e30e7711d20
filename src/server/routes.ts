import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AccessGate } from './access.js';
import { replyError, replyJson, replyRefusal } from './http-reply.js';
import type { SseEndpoint } from './sse.js';

const EVENTS_PATH = /^\/streams\/([^/]+)\/events$/;

/** What the HTTP routes need from the server. */
export interface Routes {
  readonly gate: AccessGate;
  readonly sse: SseEndpoint;
  /** Open WebSocket connections plus open SSE responses. */
  connections(): number;
}

/**
 * The HTTP side (every request but WebSocket upgrades):
 * - `GET /healthz`: 200 `{ok: true}` to anyone (liveness); `{ok: true, connections}` to a
 *   request the gate lets in (a verified credential, or any request of this site in loopback mode);
 * - `GET /streams/:stream/events`: the stream's SSE events (see {@link SseEndpoint});
 * - 403 `forbidden_host` / `forbidden_origin` and 401 from the {@link AccessGate}, then 404 for
 *   any other path, 405 for any other method.
 */
export function handleRequest(routes: Routes, req: IncomingMessage, res: ServerResponse): void {
  route(routes, req, res).catch((error: unknown) => {
    if (!res.headersSent) replyError(res, 500, 'internal', error instanceof Error ? error.message : String(error));
    else res.destroy();
  });
}

async function route(routes: Routes, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const onlyGet = (): boolean => {
    if (req.method === 'GET') return true;
    replyError(res, 405, 'method_not_allowed', `${req.method ?? 'this method'} is not allowed on ${url.pathname}; use GET`, { allow: 'GET' });
    return false;
  };
  if (url.pathname === '/healthz') {
    if (!onlyGet()) return;
    const admission = await routes.gate.admit(req);
    return replyJson(res, 200, admission.ok ? { ok: true, connections: routes.connections() } : { ok: true });
  }
  const admission = await routes.gate.admit(req);
  if (!admission.ok) return replyRefusal(res, admission);
  const events = EVENTS_PATH.exec(url.pathname);
  if (events === null) return replyError(res, 404, 'not_found', `no route for ${url.pathname}; see GET /streams/:stream/events and GET /healthz`);
  if (!onlyGet()) return;
  let stream: string;
  try {
    stream = decodeURIComponent(events[1]!);
  } catch {
    return replyError(res, 400, 'invalid_message', `the stream id in ${url.pathname} is not valid percent-encoding`);
  }
  await routes.sse.serve(req, res, url, stream, admission.request);
}
