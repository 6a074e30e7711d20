import type { IncomingMessage, ServerResponse } from 'node:http';
import { accessRequestOf, presentedToken, tokenMatches } from './access.js';
import { replyError, replyJson } from './http-reply.js';
import type { ResolvedServerOptions } from './options.js';
import type { SseEndpoint } from './sse.js';

const EVENTS_PATH = /^\/streams\/([^/]+)\/events$/;

/** What the HTTP routes need from the server. */
export interface Routes {
  readonly options: ResolvedServerOptions;
  readonly sse: SseEndpoint;
  /** Open WebSocket connections plus open SSE responses. */
  connections(): number;
}

/** Whether the request carries the server's token (always true when none is set). */
export const hasToken = (options: ResolvedServerOptions, req: IncomingMessage): boolean =>
  options.token === undefined || tokenMatches(options.token, presentedToken(req));

/**
 * The HTTP side (every request but WebSocket upgrades):
 * - `GET /healthz`: 200 `{ok: true, connections}`, without a token;
 * - `GET /streams/:stream/events`: the stream's SSE events (see {@link SseEndpoint});
 * - 401 without the token, 404 for any other path, 405 for any other method.
 */
export function handleRequest(routes: Routes, req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const onlyGet = (): boolean => {
    if (req.method === 'GET') return true;
    replyError(res, 405, 'method_not_allowed', `${req.method ?? 'this method'} is not allowed on ${url.pathname}; use GET`, { allow: 'GET' });
    return false;
  };
  if (url.pathname === '/healthz') {
    if (onlyGet()) replyJson(res, 200, { ok: true, connections: routes.connections() });
    return;
  }
  if (!hasToken(routes.options, req)) {
    return replyError(res, 401, 'unauthorized', 'a token is required: send "Authorization: Bearer <token>" or "?token=<token>"', {
      'www-authenticate': 'Bearer',
    });
  }
  const events = EVENTS_PATH.exec(url.pathname);
  if (events === null) return replyError(res, 404, 'not_found', `no route for ${url.pathname}; see GET /streams/:stream/events and GET /healthz`);
  if (!onlyGet()) return;
  let stream: string;
  try {
    stream = decodeURIComponent(events[1]!);
  } catch {
    return replyError(res, 400, 'invalid_message', `the stream id in ${url.pathname} is not valid percent-encoding`);
  }
  routes.sse.serve(req, res, url, stream, accessRequestOf(req)).catch((error: unknown) => {
    if (!res.headersSent) replyError(res, 500, 'internal', error instanceof Error ? error.message : String(error));
    else res.destroy();
  });
}
