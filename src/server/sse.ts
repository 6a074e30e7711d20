import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Subscription } from 'rxjs';
import { askAuthorize, type AccessGate, type AccessRequest } from './access.js';
import { replyError } from './http-reply.js';
import { sseEventsOf } from './notices.js';
import type { ResolvedServerOptions } from './options.js';

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
 * 3. A client that lets more than `maxBufferedBytes` pile up is disconnected: it resumes from its
 *    `Last-Event-ID` when it reconnects, so it loses nothing.
 * 4. `reauthorize` ends each response whose credential or access to its stream was revoked.
 */
export class SseEndpoint {
  /** Each open response, with who asked for which stream. */
  private readonly open = new Map<ServerResponse, { readonly access: AccessRequest; readonly stream: string }>();

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
      return replyError(res, 500, 'internal', `stream "${stream}": ${error instanceof Error ? error.message : String(error)}`);
    }
    if (head === undefined) return replyError(res, 404, 'unknown_stream', `unknown stream "${stream}"`);
    if (res.destroyed) return; // the client left meanwhile

    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no', // proxies must not hold events back
    });
    res.write(`: runestream ${JSON.stringify(stream)}\n\n`);
    this.open.set(res, { access, stream });
    let subscription: Subscription | undefined;
    const follow = (afterSeq: number, retried: boolean): void => {
      subscription = engine.runes$(stream, { afterSeq }).subscribe({
        next: (rune) => {
          const text = sseEventsOf(rune, engine.machines);
          if (text !== '') this.write(res, text);
        },
        error: () => {
          if (retried || res.destroyed) return void res.end();
          // The runes after Last-Event-ID are gone (retention): go on from the current state.
          engine.snapshot(stream).then(
            (now) => (now === undefined || res.destroyed ? res.end() : follow(now.seq, true)),
            () => res.end(),
          );
        },
        complete: () => res.end(), // the engine closed
      });
    };
    res.once('close', () => {
      subscription?.unsubscribe();
      this.open.delete(res);
    });
    follow(lastEventId ?? head.seq, false);
  }

  /** Writes a comment line to every open response (keeps proxies from timing them out). */
  heartbeat(): void {
    for (const res of this.open.keys()) this.write(res, ': ping\n\n');
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

  private write(res: ServerResponse, text: string): void {
    if (res.writableEnded) return;
    res.write(text);
    if (res.writableLength > this.options.maxBufferedBytes) res.destroy();
  }
}
