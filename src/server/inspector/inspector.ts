import type { ServerResponse } from 'node:http';
import { interval, type SchedulerLike, type Subscription } from 'rxjs';
import { errorText } from '../../reducers/error-text.js';
import { edgesOf, type Edge } from '../../reducers/table.js';
import type { Engine } from '../../streams/engine.js';
import type { RuneStore } from '../../streams/store.js';
import { askAuthorize, type AccessRequest, type Authorize } from '../access.js';
import { replyError, replyJson } from '../http-reply.js';
import { startEventStream } from '../sse.js';
import { compileRoute, type CompiledRoute, type RouteContext } from '../routes.js';
import { inspectorAssetRoutes } from './inspector-assets.js';
import { stateAt } from './state-at.js';
import { StreamDirectory, type DirectoryEntry } from './stream-directory.js';
import { TravelCheckpoints } from './travel-checkpoints.js';

/** The inspector's settings, as `createServer({ inspector })` takes them, with their defaults. */
export interface InspectorSettings {
  /** The engine's store: its heads list the streams, its runes are the timelines. */
  readonly store: RuneStore;
  /** The most streams the list keeps (the most recently active). Default 100,000. */
  readonly maxStreams?: number;
  /** How long list changes are gathered before they are sent. Default 100 ms. */
  readonly batchMs?: number;
  /** A feed whose unsent bytes pass this is ended (the page reconnects and gets the list anew). Default 8 MiB. */
  readonly maxBufferedBytes?: number;
  /**
   * Rows per event of a feed's list: the list comes in events of at most this many streams, each
   * written once the socket took the one before, so a reader that reads nothing holds one page
   * (not the list). Default 1,000.
   */
  readonly feedPageRows?: number;
  /** The most feeds open at once, in total. One more is answered 503 `too_many_readers`. Default 64. */
  readonly maxReaders?: number;
  /**
   * How many states time travel keeps to fold from next time (a stream's state at every 1000th seq
   * it folded past; the least recently used go first). Each holds one state. Default 64; 0 keeps none.
   */
  readonly travelCheckpoints?: number;
  /** The most feeds open at once per identity (the `verify` hook's `id`). One more is answered 503 `too_many_readers`. Default 8. */
  readonly maxReadersPerIdentity?: number;
}

/** What {@link createInspector} needs: the settings, and what the server has. */
export interface InspectorOptions extends InspectorSettings {
  readonly engine: Engine;
  /** The server's authorization hook: the list, the timelines and the states show only streams the caller may `see`. Default: all. */
  readonly authorize?: Authorize;
  readonly scheduler?: SchedulerLike;
}

/** The live inspector: what `createServer({ inspector })` serves at `/`. */
export interface Inspector {
  /** Its routes, answered by the server (the page and its files whatever the access checks say; the API behind them). */
  readonly routes: readonly CompiledRoute[];
  readonly directory: StreamDirectory;
  /** Its open feeds: how many, and the bytes written to them that their sockets have not taken yet. */
  readonly readers: { readonly open: number; readonly bufferedBytes: number };
  /** Ends its feeds and stops listening to the engine. */
  close(): void;
}

/** A machine as the page draws it: its states and the edges of its table (none for a machine without one). */
export interface InspectorMachine {
  readonly id: string;
  readonly states: readonly string[];
  readonly terminal: readonly string[];
  readonly edges: readonly Edge[];
}

/** Runes per timeline page, at most. */
const MAX_RUNES_PAGE = 1000;
/** A comment on every open feed this often keeps proxies from closing it. */
const FEED_PING_MS = 15_000;

/** Resolves once the response's socket took what was written (`'drain'`), or it closed. */
const drained = (res: ServerResponse): Promise<void> =>
  new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });

const seqParam = (url: URL, name: string): number | undefined | 'invalid' => {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === '') return undefined;
  return /^\d{1,15}$/.test(raw) ? Number(raw) : 'invalid';
};

/**
 * The live inspector's server side: the page and its files (built by `npm run build:inspector`
 * into `dist/inspector`), and its API:
 *
 * - `GET /inspector/api/feed` (SSE): the streams the caller may see (`{stream, machine, seq,
 *   value, at}`), a `streams` event with the first `feedPageRows`, then `more` events with the
 *   rest, each written once the socket took the one before; then `changes` events, gathered for
 *   `batchMs`. At most `maxReaders` feeds are open (`maxReadersPerIdentity` per identity): one
 *   more is 503 `too_many_readers`. A reader that lets `maxBufferedBytes` of changes pile up is
 *   ended (it reconnects and gets the list anew), so a feed holds at most one page while listing
 *   and `maxBufferedBytes` after; one whose socket takes nothing from one ping to the next (15 s)
 *   while bytes wait is closed, so a reader that stopped reading frees its place.
 * - `GET /inspector/api/machines`: each machine's states, terminal states and table edges.
 * - `GET /inspector/api/streams/:stream/runes?afterSeq=&limit=`: a page of a stream's runes.
 * - `GET /inspector/api/streams/:stream/state?seq=`: its state folded up to rune `seq` (time
 *   travel), from the stream's latest snapshot when `seq` is at or after it, else from the nearest
 *   state an earlier request kept (`travelCheckpoints`), else from seq 1 (see `stateAt`).
 *
 * Refusals: 503 `too_many_readers` (the feed), 403 `forbidden` (not allowed to `see` the stream), 404 `unknown_stream`, 400
 * `invalid_message` (a seq that is not one), 416 `beyond_head`, 410 `pruned` (retention dropped
 * the runes before a snapshot).
 */
export function createInspector(options: InspectorOptions): Inspector {
  const {
    engine,
    store,
    authorize = () => true,
    maxBufferedBytes = 8 * 1024 * 1024,
    feedPageRows = 1000,
    maxReaders = 64,
    maxReadersPerIdentity = 8,
    travelCheckpoints = 64,
    scheduler,
  } = options;
  if (!Number.isSafeInteger(travelCheckpoints) || travelCheckpoints < 0)
    throw new TypeError(`inspector: "travelCheckpoints" must be a non-negative integer, got ${String(travelCheckpoints)}`);
  const checkpoints = new TravelCheckpoints(travelCheckpoints);
  for (const [name, value] of Object.entries({ feedPageRows, maxReaders, maxReadersPerIdentity }))
    if (!Number.isSafeInteger(value) || value < 1) throw new TypeError(`inspector: "${name}" must be a positive integer, got ${String(value)}`);
  const directory = new StreamDirectory(
    { heads: () => store.heads(), runes$: engine.runes$() },
    {
      ...(options.maxStreams === undefined ? {} : { maxStreams: options.maxStreams }),
      ...(options.batchMs === undefined ? {} : { batchMs: options.batchMs }),
      ...(scheduler === undefined ? {} : { scheduler }),
    },
  );
  /** Each open feed, with the identity it was opened by. */
  const feeds = new Map<ServerResponse, string>();

  /** The entries `access` may see. */
  const visible = async (access: AccessRequest, entries: readonly DirectoryEntry[]): Promise<DirectoryEntry[]> => {
    const seen = await Promise.all(entries.map(async (entry) => askAuthorize(authorize, access, entry.stream, 'see')));
    return entries.filter((_, i) => seen[i] === true);
  };

  /** Checks `see` on the route's stream, answering the refusal; true when the handler may go on. */
  const mayShow = async (res: ServerResponse, access: AccessRequest, stream: string): Promise<boolean> => {
    const allowed = await askAuthorize(authorize, access, stream, 'see');
    if (allowed === 'failed') replyError(res, 500, 'internal', `the authorization hook failed for stream "${stream}"`);
    else if (!allowed) replyError(res, 403, 'forbidden', `not allowed to see stream "${stream}"`);
    return allowed === true;
  };

  /** Why one more feed of `identity` is refused, if it is. */
  const readersRefusal = (identity: string): string | undefined => {
    if (feeds.size >= maxReaders) return `the inspector has ${maxReaders} feeds open, its limit ("maxReaders"): close one, or try again later`;
    let own = 0;
    for (const opener of feeds.values()) if (opener === identity) own++;
    if (own >= maxReadersPerIdentity)
      return `${JSON.stringify(identity)} has ${maxReadersPerIdentity} inspector feeds open, the limit per identity ("maxReadersPerIdentity"): close one first`;
    return undefined;
  };

  const feed = async (_req: unknown, res: ServerResponse, { access }: RouteContext): Promise<void> => {
    const refusal = readersRefusal(access.identity.id);
    if (refusal !== undefined) return replyError(res, 503, 'too_many_readers', refusal);
    feeds.set(res, access.identity.id);
    const subscriptions: Subscription[] = [];
    res.once('close', () => {
      feeds.delete(res);
      for (const subscription of subscriptions) subscription.unsubscribe();
    });
    /** Writes `text`, unless the reader is too far behind: then it is ended. False when the socket is full. */
    let written = 0;
    const write = (text: string): boolean => {
      if (res.writableEnded) return false;
      if (res.writableLength > maxBufferedBytes) {
        res.end(': too far behind: reconnect for the list anew\n\n');
        return false;
      }
      const bytes = Buffer.from(text); // held as bytes only: a string waiting on a full socket is held twice
      written += bytes.length;
      return res.write(bytes);
    };
    /**
     * What the socket had taken at the previous ping: a reader whose socket took nothing in a whole
     * interval, with bytes waiting, is gone. (`writableLength` also counts the HTTP chunks' framing,
     * which `written` does not: a socket that took nothing shows the same or less.)
     */
    let takenAtPing = 0;
    const ping = (): void => {
      const taken = written - res.writableLength;
      if (res.writableLength > 0 && taken <= takenAtPing) return void res.destroy();
      takenAtPing = taken;
      write(': ping\n\n');
    };
    const send = (event: string, data: unknown): boolean => write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    await directory.ready;
    if (res.destroyed) return;
    startEventStream(res);
    subscriptions.push(interval(FEED_PING_MS, scheduler).subscribe(ping));
    // The list, a page at a time, each once the socket took the one before. The cursor is live:
    // what changes meanwhile moves ahead of it and comes in a later page, so once it is done
    // every entry sent is the latest, and `changes$`, heard from then on, tells the rest.
    const cursor = directory.cursor();
    let pending: DirectoryEntry[][] | undefined;
    for (let page = 0; pending === undefined; page++) {
      const rows: DirectoryEntry[] = [];
      for (let next = cursor.next(); ; next = cursor.next()) {
        if (next.done === true) {
          pending = [];
          subscriptions.push(
            directory.changes$.subscribe((changed) => {
              if (pending !== undefined) pending.push(changed);
              else void visible(access, changed).then((shown) => shown.length > 0 && send('changes', shown));
            }),
          );
          break;
        }
        if (rows.push(next.value) === feedPageRows) break;
      }
      const shown = await visible(access, rows);
      if (res.destroyed) return;
      if ((page === 0 || shown.length > 0) && !send(page === 0 ? 'streams' : 'more', shown) && pending === undefined) await drained(res);
      if (res.destroyed || res.writableEnded) return;
    }
    // What changed while the last page was written.
    const missed = await visible(access, pending.flat());
    pending = undefined;
    if (missed.length > 0) send('changes', missed);
  };

  const machines = (_req: unknown, res: ServerResponse): void => {
    const described: InspectorMachine[] = Object.values(engine.machines).map((machine) => {
      const { table } = machine as { table?: Parameters<typeof edgesOf>[0]['table'] };
      const { states, terminal } = machine;
      return { id: machine.id, states, terminal, edges: Array.isArray(table) ? edgesOf({ table, states, terminal }) : [] };
    });
    replyJson(res, 200, { machines: described });
  };

  const runes = async (_req: unknown, res: ServerResponse, { params, url, access }: RouteContext): Promise<void> => {
    const stream = params.stream!;
    const afterSeq = seqParam(url, 'afterSeq');
    const limit = seqParam(url, 'limit');
    if (afterSeq === 'invalid' || limit === 'invalid' || limit === 0)
      return replyError(res, 400, 'invalid_message', '"afterSeq" and "limit" must be non-negative integers ("limit" at least 1)');
    if (!(await mayShow(res, access, stream))) return;
    const head = await store.head(stream);
    if (head === undefined) return replyError(res, 404, 'unknown_stream', `unknown stream "${stream}"`);
    const page = await store.read(stream, afterSeq ?? 0, Math.min(limit ?? MAX_RUNES_PAGE, MAX_RUNES_PAGE));
    replyJson(res, 200, { stream, machine: head.machine, headSeq: head.seq, runes: page });
  };

  const state = async (_req: unknown, res: ServerResponse, { params, url, access }: RouteContext): Promise<void> => {
    const stream = params.stream!;
    const seq = seqParam(url, 'seq');
    if (seq === undefined || seq === 'invalid' || seq === 0) return replyError(res, 400, 'invalid_message', '"seq" must be a rune seq (a positive integer)');
    if (!(await mayShow(res, access, stream))) return;
    const head = await store.head(stream);
    const machine = head === undefined ? undefined : engine.machines[head.machine];
    if (head === undefined) return replyError(res, 404, 'unknown_stream', `unknown stream "${stream}"`);
    if (machine === undefined) return replyError(res, 404, 'unknown_machine', `stream "${stream}" is of machine "${head.machine}", which this engine does not have`);
    try {
      const folded = await stateAt(store, machine, stream, seq, checkpoints);
      if (folded.ok) return replyJson(res, 200, { stream, seq, state: folded.state });
      replyError(res, { unknown_stream: 404, beyond_head: 416, pruned: 410 }[folded.code], folded.code, folded.message);
    } catch (error) {
      replyError(res, 500, 'internal', `stream "${stream}": ${errorText(error)}`);
    }
  };

  const api = [
    { method: 'GET', path: '/inspector/api/feed', handler: feed },
    { method: 'GET', path: '/inspector/api/machines', handler: machines },
    { method: 'GET', path: '/inspector/api/streams/:stream/runes', handler: runes },
    { method: 'GET', path: '/inspector/api/streams/:stream/state', handler: state },
  ].map((route) => compileRoute(route, 'the inspector route'));
  return {
    routes: [...inspectorAssetRoutes(), ...api],
    directory,
    get readers() {
      let bufferedBytes = 0;
      for (const res of feeds.keys()) bufferedBytes += res.writableLength;
      return { open: feeds.size, bufferedBytes };
    },
    close: () => {
      for (const res of feeds.keys()) res.end();
      directory.close();
    },
  };
}
