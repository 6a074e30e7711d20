import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { isIPv4 } from 'node:net';
import type { HttpRefusal } from './http-reply.js';
import { CALLER_ORIGIN, clientOrigin, type RuneOrigin } from '../reducers/rune-origin.js';

/**
 * Who a connection is, as the `verify` hook established it from the credential it presented:
 * an `id`, plus whatever else the hook attaches (a role, a tenant, ...).
 */
export type Identity = { readonly id: string } & Readonly<Record<string, unknown>>;

/** What a request presents, as the `verify` hook sees it: taken from the HTTP request (or upgrade). */
export interface Credential {
  /** The token the request presented (`Authorization: Bearer T` or `?token=T`), if any. */
  readonly token?: string;
  /** The peer's IP address. */
  readonly remoteAddress?: string;
  readonly headers: IncomingHttpHeaders;
}

/**
 * Turns a request's credential into an authenticated identity; `undefined` refuses it (HTTP 401,
 * before any upgrade). Asked again for every open connection by `server.reauthorize()`.
 */
export type Verify = (credential: Credential) => Identity | undefined | Promise<Identity | undefined>;

/**
 * Who is asking, as the authorization hook sees it: the verified `identity` (decide from it: the
 * headers are whatever the client chose to send) and the credential it was verified from.
 */
export interface AccessRequest extends Credential {
  readonly identity: Identity;
}

/**
 * What a connection wants to do with a stream: `see` (subscribe, SSE, the inspector), `drive`
 * (spawn, dispatch) or `approve` (dispatch an answer to a person's approval: see
 * {@link APPROVAL_EVENTS}; AG-UI's `resume`).
 */
export type AccessAction = 'see' | 'drive' | 'approve';

/**
 * What the request does, beside its stream and action: the `machine` of a spawn, the `event`
 * type of a dispatch (or of an approval's answer). Absent for `see`.
 */
export interface AccessDetails {
  readonly machine?: string;
  readonly event?: string;
}

/** Decides whether `request` may `action` `stream` (`details`: the machine of a spawn, the event type of a dispatch). */
export type Authorize = (request: AccessRequest, stream: string, action: AccessAction, details?: AccessDetails) => boolean | Promise<boolean>;

/**
 * The event types that answer a person's approval, by machine: dispatching one is the `approve`
 * action, not `drive`. `tool-call`'s `approved` / `denied`, `agent-manager-session`'s
 * `approve_action` / `reject_action`, `autonomy-loop`'s `plan_approved` / `plan_rejected`.
 */
export const APPROVAL_EVENTS: ReadonlySet<string> = new Set(['approved', 'denied', 'approve_action', 'reject_action', 'plan_approved', 'plan_rejected']);

/** The action a dispatch of an event of type `type` is: `approve` for an approval's answer, else `drive`. */
export const dispatchAction = (type: string): AccessAction => (APPROVAL_EVENTS.has(type) ? 'approve' : 'drive');

/**
 * The event as the server dispatches it for `identity`: an `approved` event's `approver` is the
 * authenticated identity's id, whatever the client wrote there (or left out).
 */
export const approvedBy = <E extends { readonly type: string }>(event: E, identity: Identity): E => (event.type === 'approved' ? { ...event, approver: identity.id } : event);

/** The identity of every connection when no credential is configured (a loopback server). */
export const ANONYMOUS: Identity = Object.freeze({ id: 'anonymous' });

/** What a rune an identity's request writes records it came from: the client, with the identity's id (none for {@link ANONYMOUS}: the server has no identity). */
export const clientOriginOf = (identity: Identity): RuneOrigin => (identity === ANONYMOUS ? CALLER_ORIGIN : clientOrigin(identity.id));

/** Whether `host` only reaches this machine: `localhost`, `127.0.0.0/8`, `::1` (IPv4-mapped too). */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return isIPv4(v4) && v4.startsWith('127.');
}

/** A host as it appears in a URL: an IPv6 address bracketed. */
export const urlHost = (host: string): string => (host.includes(':') && !host.startsWith('[') ? `[${host}]` : host);

/** `value`'s origin (`scheme://host[:port]`, normalized as browsers send it), or undefined if it has none. */
export function originOf(value: string): string | undefined {
  try {
    const { origin } = new URL(value);
    return origin === 'null' ? undefined : origin;
  } catch {
    return undefined;
  }
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

/** The `token` option as a verify hook: one shared secret, compared in constant time, whose holder is `{id: 'token'}`. */
export function tokenVerify(token: string): Verify {
  const identity: Identity = Object.freeze({ id: 'token' });
  return (credential) => (tokenMatches(token, credential.token) ? identity : undefined);
}

/** What a request presents. */
export function credentialOf(request: IncomingMessage): Credential {
  const token = presentedToken(request);
  const remoteAddress = request.socket.remoteAddress;
  return {
    headers: request.headers,
    ...(token === undefined ? {} : { token }),
    ...(remoteAddress === undefined ? {} : { remoteAddress }),
  };
}

/** A request let in, with who it is; or the HTTP refusal to answer it with. */
export type Admission = { readonly ok: true; readonly request: AccessRequest } | ({ readonly ok: false } & HttpRefusal);

const UNAUTHORIZED: HttpRefusal = {
  status: 401,
  code: 'unauthorized',
  message: 'a valid credential is required: send "Authorization: Bearer <token>" or "?token=<token>"',
  headers: { 'www-authenticate': 'Bearer' },
};

const firstHeader = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value[0] : value);

/**
 * Decides who may talk to the server at all, before any route or upgrade:
 * 1. With no credential configured (loopback mode), the `Host` header must name the server
 *    itself (`forbidden_host`): a page on another name that resolves to 127.0.0.1 (DNS
 *    rebinding) sends no `Origin` on a GET, but its own `Host`.
 * 2. An `Origin` header, when sent, must be one of the server's own origins or
 *    `allowedOrigins` (`forbidden_origin`); clients that send none (Node, curl) pass.
 * 3. `verify` turns the credential into an identity (`unauthorized` when it refuses); in
 *    loopback mode every request is {@link ANONYMOUS}.
 */
export class AccessGate {
  private ownOrigins: readonly string[] = [];
  private ownHosts: ReadonlySet<string> = new Set();

  constructor(
    private readonly host: string,
    private readonly allowedOrigins: readonly string[],
    private readonly verify: Verify | undefined,
  ) {}

  /** Where the server listens (the real port when it asked for 0): its own origins follow from it. */
  listening(port: number): void {
    const names = isLoopbackHost(this.host) ? [this.host, '127.0.0.1', 'localhost', '::1'] : [this.host];
    this.ownOrigins = [...new Set(names.map((name) => originOf(`http://${urlHost(name)}:${port}`)!))];
    this.ownHosts = new Set(this.ownOrigins.map((origin) => new URL(origin).host));
  }

  /** Whether the request's `Host` and `Origin` may reach the server; the refusal if not. */
  checkSite(request: IncomingMessage): HttpRefusal | undefined {
    if (this.verify === undefined) {
      const host = firstHeader(request.headers.host);
      if (host === undefined || !this.ownHosts.has(hostOf(host))) {
        const names = [...this.ownHosts].join(', ');
        return {
          status: 403,
          code: 'forbidden_host',
          message: `Host ${host === undefined ? '(none)' : JSON.stringify(host)} is not a name of this server (${names}): with no credential configured only these are served (a defense against DNS rebinding); set "token" or "verify" to serve other names`,
        };
      }
    }
    const origin = firstHeader(request.headers.origin);
    if (origin === undefined || this.allowedOrigins.includes('*')) return undefined;
    const normalized = originOf(origin);
    if (normalized !== undefined && (this.ownOrigins.includes(normalized) || this.allowedOrigins.includes(normalized))) return undefined;
    return {
      status: 403,
      code: 'forbidden_origin',
      message: `origin ${JSON.stringify(origin)} is not allowed: only this server's own origins (${this.ownOrigins.join(', ')}) and clients that send no Origin are; allow it with the "allowedOrigins" option (runestream serve --allow-origin ${normalized ?? '<origin>'})`,
    };
  }

  /**
   * The request's `Origin` when it is another site that `allowedOrigins` lets in (listed, or
   * `'*'`): the origin to name in the CORS headers. Undefined for no Origin, this server's own
   * (a browser needs no CORS there) and every origin not allowed (the browser then blocks it).
   */
  crossOrigin(request: IncomingMessage): string | undefined {
    const origin = firstHeader(request.headers.origin);
    const normalized = origin === undefined ? undefined : originOf(origin);
    if (normalized === undefined || this.ownOrigins.includes(normalized)) return undefined;
    return this.allowedOrigins.includes('*') || this.allowedOrigins.includes(normalized) ? origin : undefined;
  }

  /** Checks the site, then verifies the credential. */
  async admit(request: IncomingMessage): Promise<Admission> {
    const refusal = this.checkSite(request);
    if (refusal !== undefined) return { ok: false, ...refusal };
    const credential = credentialOf(request);
    const identity = await this.identify(credential);
    if (identity === 'failed') return { ok: false, status: 500, code: 'internal', message: 'the verify hook failed' };
    if (identity === undefined) return { ok: false, ...UNAUTHORIZED };
    return { ok: true, request: { ...credential, identity } };
  }

  /**
   * The identity `credential` verifies as: undefined when `verify` refuses it, `'failed'` when
   * the hook throws, rejects or returns something that is not an identity (revealing nothing).
   */
  async identify(credential: Credential): Promise<Identity | undefined | 'failed'> {
    if (this.verify === undefined) return ANONYMOUS;
    // An AccessRequest is re-verified from its credential alone, not from the identity it had.
    const { identity: _previous, ...presented } = credential as Credential & { identity?: Identity };
    try {
      const identity = await this.verify(presented);
      if (identity === undefined) return undefined;
      return typeof identity === 'object' && identity !== null && typeof identity.id === 'string' ? identity : 'failed';
    } catch {
      return 'failed';
    }
  }
}

/** A `Host` header as `URL.host` writes it (lowercase, no default port); '' when it is not a host. */
function hostOf(header: string): string {
  try {
    return new URL(`http://${header}`).host;
  } catch {
    return '';
  }
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
  details?: AccessDetails,
): boolean | 'failed' | Promise<boolean | 'failed'> {
  let answer: boolean | Promise<boolean>;
  try {
    answer = details === undefined ? authorize(request, stream, action) : authorize(request, stream, action, details);
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
