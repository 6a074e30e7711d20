import type { IncomingMessage, ServerResponse } from 'node:http';
import { askAuthorize, type AccessGate, type AccessRequest } from './access.js';
import { replyError } from './http-reply.js';
import { failureCodeOf } from './read-failure.js';
import type { ResolvedServerOptions } from './options.js';
import { SseFeed } from './sse-feed.js';
import { errorText } from '../reducers/error-text.js';

/** Starts an SSE response: 200 with its content type, no caching, and no proxy buffering. */
export function startEventStream(res: ServerResponse, contentType = 'text/event-stream; charset=utf-8'): void {
  res.writeHead(200, {
    'content-type': contentType,
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no', // proxies must not hold events back
  });
}

/** `Last-Event-ID` (header, or `?lastEventId=` where a client cannot set headers): a rune seq. */
function lastEventIdOf(req: IncomingMessage, url: URL): number | undefined | 'invalid' {
  const header = req.headers['last-event-id'];
  const raw = (Array.isArray(header) ? header[0] : header) ?? url.searchParams.get('lastEventId') ?? undefined;
  if (raw === undefined || raw === '') return undefined;
  return /^\d{1,15}$/.test(raw) ? Number(raw) : 'invalid';
}

/**
 * The SSE endpoint, `GET /streams/:stream/events`, and its open responses.
 *
 * 1. Refuses before any byte of the stream: 403 (`authorize` says no to `see`), 404 (unknown
 *    stream), 400 (a `Last-Event-ID` that is not a seq).
 * 2. Sends the seed-000 events of each rune after `Last-Event-ID` (without one: from now on),
 *    each with the rune's seq as its `id`, so a reconnecting `EventSource` resumes with no gap.
 *    Where the runes after it were pruned by retention, it continues from the current state.
 *    The replay of stored runes is paced by the socket, never cut, however far back it starts.
 * 3. A client that lets more than `maxBufferedBytes` of live events pile up is disconnected: it
 *    resumes from its `Last-Event-ID` when it reconnects, so it loses nothing.
 * 4. A stream whose machine has a `derive` also gets `derived` events: its view now, then each change.
 * 5. `reauthorize` ends each response whose credential or access to its stream was revoked.
 */
export class SseEndpoint {
  /** Each open response, with who asked for which stream, and its feed of events. */
  private readonly open = new Map<ServerResponse, { readonly access: AccessRequest; readonly stream: string; readonly feed: SseFeed }>();

  constructor(private readonly options: ResolvedServerOptions) {}

  /** How many SSE responses are open. */
  get size(): number {
    return this.open.size;
  }

  async serve(req: IncomingMessage, res: ServerResponse, url: URL, stream: string, access: AccessRequest): Promise<void> {
    const { engine, authorize } = this.options;
    const lastEventId = lastEventIdOf(req, url);
    if (lastEventId === 'invalid') {
      return replyError(res, 400, 'invalid_message', 'Last-Event-ID must be a rune seq (a non-negative integer)');
    }
    const answer = await askAuthorize(authorize, access, stream, 'see');
    if (answer === 'failed') return replyError(res, 500, 'internal', `the authorization hook failed for stream "${stream}"`);
    if (!answer) return replyError(res, 403, 'forbidden', `not allowed to see stream "${stream}"`);
    let head;
    try {
      head = await engine.snapshot(stream);
    } catch (error) {
      return replyError(res, 500, failureCodeOf(error), `stream "${stream}": ${errorText(error)}`);
    }
    if (head === undefined) return replyError(res, 404, 'unknown_stream', `unknown stream "${stream}"`);
    if (res.destroyed) return; // the client left meanwhile

    startEventStream(res);
    res.write(`: runestream ${JSON.stringify(stream)}\n\n`);
    const feed = new SseFeed(res, engine, stream, lastEventId ?? head.seq, head, this.options.maxBufferedBytes, this.options.partialResponse);
    this.open.set(res, { access, stream, feed });
    res.once('close', () => this.open.delete(res));
  }

  /** Writes a comment line to every open response (keeps proxies from timing them out). */
  heartbeat(): void {
    for (const { feed } of this.open.values()) feed.comment('ping');
  }

  /** Ends every open response. */
  closeAll(): void {
    for (const res of this.open.keys()) res.end();
  }

  /**
   * Verifies each open response's credential again, with the identity it verifies as asks
   * `authorize` again to `see` its stream, and ends each response refused either (a comment line
   * says why). A failing hook ends it too: access that cannot be confirmed is not kept.
   */
  async reauthorize(gate: AccessGate): Promise<void> {
    const { authorize } = this.options;
    await Promise.all(
      [...this.open].map(async ([res, { access, stream }]) => {
        const identity = await gate.identify(access);
        const allowed = identity !== undefined && identity !== 'failed' && (await askAuthorize(authorize, { ...access, identity }, stream, 'see')) === true;
        if (allowed || res.writableEnded) return;
        res.write(`: forbidden: access to stream ${JSON.stringify(stream)} was revoked\n\n`);
        res.end();
      }),
    );
  }
}
