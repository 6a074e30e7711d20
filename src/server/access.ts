import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { isIPv4 } from 'node:net';

/** Who is asking, as the authorization hook sees it: taken from the HTTP request (or upgrade). */
export interface AccessRequest {
  /** The token the request presented (`Authorization: Bearer T` or `?token=T`), if any. */
  readonly token?: string;
  /** The peer's IP address. */
  readonly remoteAddress?: string;
  readonly headers: IncomingHttpHeaders;
}

/** What a connection wants to do with a stream: `see` (subscribe, SSE) or `drive` (spawn, dispatch). */
export type AccessAction = 'see' | 'drive';

/** Decides whether `request` may `action` `stream`. */
export type Authorize = (request: AccessRequest, stream: string, action: AccessAction) => boolean | Promise<boolean>;

/** Whether `host` only reaches this machine: `localhost`, `127.0.0.0/8`, `::1` (IPv4-mapped too). */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return isIPv4(v4) && v4.startsWith('127.');
}

/** The token a request presents: `Authorization: Bearer T`, else the `token` query parameter. */
export function presentedToken(request: IncomingMessage): string | undefined {
  const header = request.headers.authorization;
  const bearer = header === undefined ? undefined : /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
  if (bearer !== undefined) return bearer;
  return new URL(request.url ?? '/', 'http://localhost').searchParams.get('token') ?? undefined;
}

/** Compares tokens in constant time (hashes first, so their lengths leak nothing either). */
export function tokenMatches(expected: string, presented: string | undefined): boolean {
  if (presented === undefined) return false;
  const digest = (s: string): Buffer => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(expected), digest(presented));
}

/** The hook's view of a request. */
export function accessRequestOf(request: IncomingMessage): AccessRequest {
  const token = presentedToken(request);
  const remoteAddress = request.socket.remoteAddress;
  return {
    headers: request.headers,
    ...(token === undefined ? {} : { token }),
    ...(remoteAddress === undefined ? {} : { remoteAddress }),
  };
}

/**
 * Asks the hook, turning a throw or a rejection into `'failed'` (the caller answers `internal`,
 * revealing nothing). Stays synchronous when the hook is, so requests keep their order cheaply.
 */
export function askAuthorize(
  authorize: Authorize,
  request: AccessRequest,
  stream: string,
  action: AccessAction,
): boolean | 'failed' | Promise<boolean | 'failed'> {
  let answer: boolean | Promise<boolean>;
  try {
    answer = authorize(request, stream, action);
  } catch {
    return 'failed';
  }
  if (typeof (answer as { then?: unknown } | undefined)?.then === 'function') {
    return Promise.resolve(answer).then(
      (allowed) => allowed === true,
      () => 'failed' as const,
    );
  }
  return answer === true;
}
