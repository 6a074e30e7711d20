import { METHODS, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AccessGate, AccessRequest, Admission } from './access.js';
import { replyError, replyJson, replyRefusal } from './http-reply.js';
import { readBody, type BodyLimits, type BodyRefusal, type ReadBody } from './request-body.js';
import type { SseEndpoint } from './sse.js';

/** What a route's handler receives besides the request and the response. */
export interface RouteContext {
  /** The path's named parameters (`:stream` in `/streams/:stream/events`), percent-decoded. */
  readonly params: Readonly<Record<string, string>>;
  /** Who asks, as the access checks verified it (`identity`, and the credential it came from). */
  readonly access: AccessRequest;
  /** The request's URL (its query in `searchParams`). */
  readonly url: URL;
  /** The request body, read whole (at most `maxBodyBytes`); empty for GET and HEAD. */
  readonly body: Buffer;
}

/**
 * Answers a request to its route. A throw or a rejection is answered 500 `internal` (or, once
 * the response has started, ends it); the server and other requests carry on.
 */
export type RouteHandler = (req: IncomingMessage, res: ServerResponse, context: RouteContext) => void | Promise<void>;

/** One entry of the route table: a method (`'GET'`, `'POST'`, ...), a path with `:name` parameters, and its handler. */
export interface Route {
  readonly method: string;
  readonly path: string;
  readonly handler: RouteHandler;
}

/** A route's path, compiled: its regular expression and its parameters' names, in order. */
export interface CompiledRoute extends Route {
  readonly segments: readonly string[];
  readonly pattern: RegExp;
  readonly names: readonly string[];
  /**
   * Set on a route answered whatever the access checks say (only `/healthz`, which tells the
   * refused less): it answers with their verdict, in place of `handler`. Every other route is
   * refused by the checks before its handler runs.
   */
  readonly open?: (res: ServerResponse, admission: Admission, url: URL) => void;
}

const PARAM = /^:([A-Za-z_][A-Za-z0-9_]*)$/;
// RFC 3986 pchar without percent-escapes' '%' handled apart: unreserved, sub-delims, ':' and '@'.
const LITERAL = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=@]|%[0-9A-Fa-f]{2})+$/;

/**
 * Checks and compiles a route (`where` names it in the TypeError, e.g. `"routes"[2]`): the method
 * one of `node:http`'s `METHODS`, the path `/` then segments, each a literal or a `:name` matching
 * one whole non-empty segment.
 */
export function compileRoute(route: Route, where: string): CompiledRoute {
  const fail = (message: string): never => {
    throw new TypeError(`createServer: ${where} ${message}`);
  };
  if (typeof route !== 'object' || route === null) fail(`must be { method, path, handler }, got ${String(route)}`);
  const { method, path, handler } = route;
  if (typeof method !== 'string' || !METHODS.includes(method)) fail(`has method ${JSON.stringify(method)}: use an uppercase HTTP method such as 'GET' or 'POST'`);
  if (typeof handler !== 'function') fail(`has no handler: "handler" must be a function (req, res, context)`);
  if (typeof path !== 'string' || !path.startsWith('/')) fail(`has path ${JSON.stringify(path)}: a path starts with '/'`);
  const segments = path === '/' ? [] : path.slice(1).split('/');
  const names: string[] = [];
  for (const segment of segments) {
    const name = PARAM.exec(segment)?.[1];
    if (name !== undefined) {
      if (names.includes(name)) fail(`has the parameter ":${name}" twice in ${path}`);
      names.push(name);
    } else if (!LITERAL.test(segment)) {
      fail(`has path ${JSON.stringify(path)}: segment ${JSON.stringify(segment)} is neither a literal nor a ":name" parameter`);
    }
  }
  const source = segments.map((segment) => (PARAM.test(segment) ? '/([^/]+)' : `/${segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`)).join('');
  return { method, path, handler, segments, names, pattern: new RegExp(`^${source || '/'}$`) };
}

/** Whether some URL path matches both routes' paths (a parameter matches any segment). */
export function pathsOverlap(a: CompiledRoute, b: CompiledRoute): boolean {
  return a.segments.length === b.segments.length && a.segments.every((s, i) => s === b.segments[i] || PARAM.test(s) || PARAM.test(b.segments[i]!));
}

/** What the HTTP routes need from the server. */
export interface RouteDeps {
  readonly gate: AccessGate;
  /** How request bodies are bounded: `maxBodyBytes`, and the budget and deadline shared with the WebSocket's unfinished messages. */
  readonly body: BodyLimits;
  /** Open WebSocket connections plus open SSE responses. */
  connections(): number;
}

/** The built-in routes, `GET /healthz` and `GET /streams/:stream/events`. */
export function builtInRoutes(deps: Pick<RouteDeps, 'connections'> & { readonly sse: SseEndpoint }): readonly CompiledRoute[] {
  return [
    {
      ...compileRoute({ method: 'GET', path: '/healthz', handler: () => {} }, 'the built-in route'), // `open` answers in its place
      // Liveness to anyone; the connection count only to a request the gate lets in.
      open: (res, admission) => replyJson(res, 200, admission.ok ? { ok: true, connections: deps.connections() } : { ok: true }),
    },
    compileRoute(
      { method: 'GET', path: '/streams/:stream/events', handler: (req, res, { url, params, access }) => deps.sse.serve(req, res, url, params.stream!, access) },
      'the built-in route',
    ),
  ];
}

/**
 * The user's routes checked against each other and the built-in ones: two routes whose paths can
 * match the same URL clash (a TypeError naming both) unless both are the user's with other methods.
 */
export function checkUserRoutes(routes: unknown, builtIns: readonly CompiledRoute[]): CompiledRoute[] {
  if (!Array.isArray(routes)) throw new TypeError(`createServer: "routes" must be an array of { method, path, handler }, got ${String(routes)}`);
  const compiled: CompiledRoute[] = [];
  for (const [i, route] of (routes as Route[]).entries()) {
    const entry = compileRoute(route, `"routes"[${i}]`);
    const builtIn = builtIns.find((b) => pathsOverlap(b, entry));
    if (builtIn !== undefined) {
      throw new TypeError(`createServer: "routes"[${i}] (${entry.method} ${entry.path}) clashes with the built-in route ${builtIn.method} ${builtIn.path}`);
    }
    const twin = compiled.findIndex((c) => c.method === entry.method && pathsOverlap(c, entry));
    if (twin !== -1) throw new TypeError(`createServer: "routes"[${i}] (${entry.method} ${entry.path}) clashes with "routes"[${twin}] (${compiled[twin]!.path})`);
    compiled.push(entry);
  }
  return compiled;
}

/** The routes whose path matches `pathname`, with the parameters' raw (still encoded) values. */
function matching(routes: readonly CompiledRoute[], pathname: string): { route: CompiledRoute; raw: string[] }[] {
  return routes.flatMap((route) => {
    const match = route.pattern.exec(pathname);
    return match === null ? [] : [{ route, raw: match.slice(1) }];
  });
}

/**
 * The HTTP side (every request but WebSocket upgrades), for a request whose path some route
 * matches; returns false, answering nothing, for any other (so a host app can answer it).
 * 0. CORS: a preflight from an origin `allowedOrigins` lets in is answered 204 (the path's
 *    methods, the headers a client sends), and every answer to such an origin names it in
 *    `Access-Control-Allow-Origin`; a preflight from any other origin is 403 `forbidden_origin`.
 * 1. An open route (`/healthz`): 405 for another method, else its answer with the checks' verdict.
 * 2. 403 `forbidden_host` / `forbidden_origin` and 401 from the {@link AccessGate}, before any
 *    other route (and before telling 404 from 405).
 * 3. 405 `method_not_allowed` with `Allow` listing the path's methods; 400 `invalid_message` for
 *    a parameter that is not valid percent-encoding; 413 `body_too_large` past `maxBodyBytes`;
 *    503 `inbound_limit` for a body that would put the bytes held across all connections over
 *    `maxInboundBytes`; 408 `body_timeout` for one not whole within `messageTimeoutMs`.
 * 4. The route's handler; a throw is 500 `internal`. The body's bytes count against
 *    `maxInboundBytes` until it returns.
 */
export function handleRoute(deps: RouteDeps, all: readonly CompiledRoute[], req: IncomingMessage, res: ServerResponse): boolean {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const matches = matching(all, url.pathname);
  if (matches.length === 0) return false;
  void answer(deps, matches, url, req, res); // answer catches its own failures: a throw is 500 `internal`
  return true;
}

/** Answers every request: its route, or 404 `not_found` (after the access checks) when none matches. */
export function handleRequest(deps: RouteDeps, all: readonly CompiledRoute[], req: IncomingMessage, res: ServerResponse): void {
  if (handleRoute(deps, all, req, res)) return;
  deps.gate
    .admit(req)
    .then((admission) => {
      if (!admission.ok) return replyRefusal(res, admission);
      const paths = all.map((route) => `${route.method} ${route.path}`).join(', ');
      replyError(res, 404, 'not_found', `no route for ${new URL(req.url ?? '/', 'http://localhost').pathname}; the routes are ${paths}`);
    })
    .catch(failed(res, 'the access checks'));
}

const failed = (res: ServerResponse, what: string) => (): void => {
  if (!res.headersSent) replyError(res, 500, 'internal', `${what} failed`);
  else res.destroy();
};

/** Request headers a cross-origin page may send (a token, a JSON body, SSE's resume point). */
const CORS_REQUEST_HEADERS = 'authorization, content-type, accept, last-event-id';

/**
 * CORS for an origin `allowedOrigins` lets in (see `AccessGate.crossOrigin`): a preflight
 * (`OPTIONS` with `Access-Control-Request-Method`) is answered 204 with the path's methods; any
 * other request gets `Access-Control-Allow-Origin` on its answer. True when it answered.
 */
function answerCors(deps: RouteDeps, matches: readonly { route: CompiledRoute }[], req: IncomingMessage, res: ServerResponse): boolean {
  const preflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
  const origin = deps.gate.crossOrigin(req);
  if (origin === undefined) {
    if (!preflight) return false;
    const refusal = deps.gate.checkSite(req);
    if (refusal !== undefined) replyRefusal(res, refusal);
    else res.writeHead(204, { allow: matches.map(({ route }) => route.method).join(', ') }).end(); // same site: nothing to allow
    return true;
  }
  res.setHeader('access-control-allow-origin', origin);
  res.setHeader('vary', 'Origin');
  if (!preflight) return false;
  res
    .writeHead(204, {
      'access-control-allow-methods': matches.map(({ route }) => route.method).join(', '),
      'access-control-allow-headers': CORS_REQUEST_HEADERS,
      'access-control-max-age': '600',
    })
    .end();
  return true;
}

async function answer(deps: RouteDeps, matches: { route: CompiledRoute; raw: string[] }[], url: URL, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chosen = matches.find(({ route }) => route.method === req.method);
  const name = `${req.method ?? '?'} ${url.pathname}`;
  try {
    if (answerCors(deps, matches, req, res)) return;
    const allow = matches.map(({ route }) => route.method).join(', ');
    const refuseMethod = (): void => replyError(res, 405, 'method_not_allowed', `${req.method ?? 'this method'} is not allowed on ${url.pathname}; use ${allow}`, { allow });
    const open = matches.find(({ route }) => route.open !== undefined)?.route.open;
    if (open !== undefined) {
      if (chosen === undefined) return refuseMethod();
      return open(res, await deps.gate.admit(req), url);
    }
    const admission = await deps.gate.admit(req);
    if (!admission.ok) return replyRefusal(res, admission);
    if (chosen === undefined) return refuseMethod();
    const params: Record<string, string> = {};
    for (const [i, key] of chosen.route.names.entries()) {
      try {
        params[key] = decodeURIComponent(chosen.raw[i]!);
      } catch {
        return replyError(res, 400, 'invalid_message', `the :${key} parameter in ${url.pathname} is not valid percent-encoding`);
      }
    }
    let read: ReadBody = NO_BODY;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      const outcome = await readBody(req, deps.body);
      if (outcome === 'aborted') return;
      // Closing the connection stops the rest of the body; it is read and dropped until then.
      if (typeof outcome === 'string') return replyBodyRefusal(res, outcome, name, deps.body);
      read = outcome;
    }
    try {
      await chosen.route.handler(req, res, { params, url, body: read.body, access: admission.request });
    } finally {
      read.release();
    }
  } catch {
    failed(res, `the handler of ${chosen?.route.method ?? req.method} ${chosen?.route.path ?? url.pathname}`)();
  }
}

const NO_BODY: ReadBody = { body: Buffer.alloc(0), release: () => {} };

/** Answers a body that was not read, closing the connection. */
function replyBodyRefusal(res: ServerResponse, refusal: Exclude<BodyRefusal, 'aborted'>, name: string, limits: BodyLimits): void {
  const close = { connection: 'close' };
  if (refusal === 'too_large') return replyError(res, 413, 'body_too_large', `the body of ${name} is larger than maxBodyBytes (${limits.maxBodyBytes} bytes)`, close);
  if (refusal === 'timeout') return replyError(res, 408, 'body_timeout', `the body of ${name} did not arrive whole within ${limits.timeoutMs} ms (messageTimeoutMs)`, close);
  replyError(res, 503, 'inbound_limit', `the body of ${name} would put the bytes held across all connections over maxInboundBytes; try again later`, close);
}
