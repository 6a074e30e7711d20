import { Subject, defer, distinctUntilChanged, map, throwError, type Observable } from 'rxjs';
import type { ConnectionStateName } from '../../reducers/connection/index.js';
import type { Rune } from '../../reducers/rune.js';
import { CLOSE_CODES, ClientMessage, type ServerMessage } from '../protocol.js';
import { backoffDelay } from './backoff.js';
import { createConnectionDriver, type SocketDrop } from './connection-driver.js';
import { ClientError } from './errors.js';
import { readServerFrame } from './incoming.js';
import { resolveClientOptions, type ClientOptions } from './options.js';
import { PendingRequests, type RequestBody } from './requests.js';
import { StreamView } from './stream-view.js';
import { errorText } from '../../reducers/error-text.js';
import { describeIssues, parseBounded } from '../../reducers/validate.js';

/** An event to dispatch: a plain object with a `type`, validated by the stream's machine on the server. */
export type ClientEvent = { type: string } & Record<string, unknown>;

/** A runestream client: streams' state and runes from a server, and commands to it. */
export interface RunestreamClient {
  /**
   * The `connection` machine's state name: the current one, then each change. Completes on
   * `close()`, after DISCONNECTED.
   */
  readonly connectionState$: Observable<ConnectionStateName>;
  /**
   * The state of `stream`: the server's snapshot, then the state after each rune, folded with the
   * machine the rune names (`rune.machine`). A late subscriber gets the current state first.
   * Subscribes the stream on the server while anyone subscribes here (shared with `runes$`).
   * Errors with a {@link ClientError} when the server refuses the stream (`unknown_stream`,
   * `forbidden`, ...); completes on `close()`.
   */
  state$<S = unknown>(stream: string): Observable<S>;
  /**
   * Beside each state of `stream`, the view its machine's `derive` computes from it (an agent
   * session's UI flags: `agentManagerUiFlags`), `undefined` for a machine without one: the
   * server's with a snapshot, then computed here for each folded state. Never stored anywhere.
   * Shares the stream's subscription with `state$`.
   */
  derived$<D = unknown>(stream: string): Observable<D>;
  /**
   * The runes of `stream` from now on: each exactly once, in seq order, across reconnects. Runes a
   * mid-stream snapshot covers (the server coalesced a slow client) are not sent by the server.
   * Shares the stream's subscription with `state$`.
   */
  runes$(stream: string): Observable<Rune>;
  /** Creates `stream` as an instance of `machine`; resolves with the seq of its first rune. */
  spawn(stream: string, machine: string, input?: unknown): Promise<{ seq: number }>;
  /**
   * Sends `event` to `stream`; resolves with the seq of its rune once it is durable, or rejects
   * with a {@link ClientError} whose `code` says why nothing was appended (`not_allowed`, ...) or
   * that the answer was lost (`connection_lost`).
   */
  dispatch(stream: string, event: ClientEvent): Promise<{ seq: number }>;
  /**
   * What went wrong that no caller is waiting for, as {@link ClientError}s: a frame from the server
   * that is not a protocol message (ignored), a dropped socket (the client reconnects), an error
   * naming no request or watched stream. Nothing here breaks the client. Completes on `close()`.
   */
  readonly errors$: Observable<ClientError>;
  /** Stops reconnecting, rejects pending requests with `closed`, completes every stream; resolves once the socket is closed. */
  close(): Promise<void>;
}

const describeDrop = (url: string, drop: SocketDrop): string =>
  `the connection to ${url} dropped (close code ${drop.code}${drop.reason ? `, "${drop.reason}"` : ''}${drop.error ? `: ${drop.error}` : ''}); reconnecting`;

/**
 * Creates a client of a runestream server.
 *
 * 1. It connects lazily: the first `state$` / `runes$` subscription, `spawn` or `dispatch` opens
 *    the socket; from then on it stays connected, reconnecting forever with backoff, until `close()`.
 * 2. The `connection` machine is its connection state, applied as data (see `connectionState$`).
 * 3. On every open it sends the requests that waited (in the order they were made), then
 *    subscribes every watched stream: `afterSeq` = the last seq it saw, so nothing is missed or repeated.
 * 4. A request in flight when the socket drops rejects with `connection_lost` and is not retried.
 *
 * ## Example
 * ```ts
 * import { filter, firstValueFrom } from 'rxjs';
 * import { WebSocket } from 'ws'; // Node 20; browsers have a global WebSocket
 * import { createEngine } from 'runestream';
 * import { createServer } from 'runestream/server';
 * import { createClient } from 'runestream/client';
 *
 * const engine = createEngine();
 * const server = await createServer({ engine, port: 0 }); // a server to talk to, on a free port
 * const client = createClient({ url: server.url, WebSocket });
 * console.log(await client.spawn('chat-1', 'chat-actor'));   // Logs: { seq: 1 }
 * const paused = firstValueFrom(client.state$<{ value: string }>('chat-1').pipe(filter((s) => s.value === 'paused')));
 * console.log(await client.dispatch('chat-1', { type: 'Pause', reason: 'lunch' })); // Logs: { seq: 2 }
 * console.log(await paused);
 * // Logs: { value: 'paused', reason: 'lunch' }
 * await client.close();
 * await server.close();
 * await engine.close();
 * ```
 */
export function createClient(options: ClientOptions): RunestreamClient {
  const config = resolveClientOptions(options);
  const errors = new Subject<ClientError>();
  const requests = new PendingRequests();
  /** The streams someone subscribes to, by id. */
  const views = new Map<string, StreamView>();
  let closed = false;

  const driver = createConnectionDriver({
    socketUrl: config.socketUrl,
    WebSocket: config.WebSocket,
    scheduler: config.scheduler,
    delayOf: (attempt) => backoffDelay(attempt, config.backoff, config.random),
    onOpen() {
      sendWaitingRequests();
      for (const view of views.values()) if (!view.subscribedOnWire) subscribeOnWire(view);
    },
    onMessage: (data) => {
      const frame = readServerFrame(data);
      if (frame.ok) route(frame.message);
      else errors.next(frame.error);
    },
    onDrop(drop) {
      if (drop.code === CLOSE_CODES.unauthorized) return revoked(drop);
      for (const view of views.values()) {
        view.subscribedOnWire = false;
        view.resyncing = false;
      }
      requests.rejectSent(
        new ClientError(
          'connection_lost',
          "the connection dropped before the server answered; the request was not retried (a dispatch is not idempotent): read the stream's runes to learn whether it was applied",
        ),
      );
      errors.next(new ClientError('connection_lost', describeDrop(config.socketUrl, drop)));
    },
  });

  /**
   * The server revoked this client's credential (close 4001): reconnecting with it would only be
   * refused again, so the client ends as `close()` ends it, every request and stream failing
   * with `unauthorized`, and says so on `errors$`.
   */
  function revoked(drop: SocketDrop): void {
    closed = true;
    const error = new ClientError(
      'unauthorized',
      `the server revoked this client's credential (close code 4001${drop.reason ? `, "${drop.reason}"` : ''}): it does not reconnect; create a client with a new token`,
    );
    requests.rejectAll(error);
    void driver.close(); // no reconnect: the socket is gone already
    for (const view of [...views.values()]) view.fail(error);
    views.clear();
    errors.next(error);
    errors.complete();
  }

  /** Sends every request not sent yet, oldest first, so they reach the server in the order they were made. */
  function sendWaitingRequests(): void {
    for (const frame of requests.takeUnsent()) driver.send(frame);
  }

  function subscribeOnWire(view: StreamView): void {
    // After a reconnect, resume after the last seq seen; the first time, ask for a snapshot.
    driver.send(JSON.stringify({ op: 'subscribe', stream: view.stream, ...(view.hasBase ? { afterSeq: view.lastSeq } : {}) }));
    view.subscribedOnWire = true;
    driver.apply({ type: 'subscribe', stream: view.stream });
  }

  function unsubscribeOnWire(view: StreamView): void {
    if (!view.subscribedOnWire) return;
    view.subscribedOnWire = false;
    if (driver.isOpen) driver.send(JSON.stringify({ op: 'unsubscribe', stream: view.stream }));
    driver.apply({ type: 'unsubscribe', stream: view.stream });
  }

  const hooks = {
    watch(view: StreamView) {
      views.set(view.stream, view);
      if (driver.isOpen) subscribeOnWire(view);
      else driver.connect();
    },
    unwatch(view: StreamView) {
      if (views.get(view.stream) !== view) return; // failed or closed: already let go
      views.delete(view.stream);
      unsubscribeOnWire(view);
    },
  };

  /** The view of `stream`: the watched one, or a new one that registers itself on its first subscriber. */
  const viewOf = (stream: string): StreamView => views.get(stream) ?? new StreamView(stream, config.machines, hooks);

  function route(message: ServerMessage): void {
    switch (message.op) {
      case 'ack':
        if (!requests.resolve(message.id, message.seq)) errors.next(unexpected(message));
        return;
      case 'error':
        return routeError(message);
      case 'snapshot':
        // A stream unsubscribed a moment ago may still have frames on the way: ignore them.
        views.get(message.stream)?.applySnapshot(message.seq, message.state, message.derived);
        return;
      case 'rune': {
        const view = views.get(message.rune.stream);
        if (view !== undefined && view.applyRune(message.rune) === 'gap') resync(view, message.rune);
        return;
      }
    }
  }

  function routeError(message: Extract<ServerMessage, { op: 'error' }>): void {
    const error = new ClientError(message.code, message.message, message.stream);
    if (message.id !== undefined) {
      if (!requests.reject(message.id, error)) errors.next(unexpected(message));
      return;
    }
    const view = message.stream === undefined ? undefined : views.get(message.stream);
    if (view === undefined) {
      errors.next(error);
      return;
    }
    // The server refused the stream (unknown_stream, forbidden, ...): its subscribers get the error.
    views.delete(view.stream);
    if (view.subscribedOnWire) {
      view.subscribedOnWire = false;
      driver.apply({ type: 'unsubscribe', stream: view.stream });
    }
    view.fail(error);
  }

  /** A rune past the next seq: the server skipped some. Resubscribe from the last seq seen, once. */
  function resync(view: StreamView, rune: Rune): void {
    if (view.resyncing || !driver.isOpen) return;
    view.resyncing = true;
    errors.next(
      new ClientError(
        'rune_gap',
        `stream "${view.stream}": expected rune ${view.hasBase ? view.lastSeq + 1 : '1 (the spawn) or a snapshot'}, got rune ${rune.seq}; resubscribing after ${view.lastSeq}`,
        view.stream,
      ),
    );
    driver.send(JSON.stringify({ op: 'unsubscribe', stream: view.stream }));
    driver.send(JSON.stringify({ op: 'subscribe', stream: view.stream, ...(view.hasBase ? { afterSeq: view.lastSeq } : {}) }));
  }

  function request(body: RequestBody): Promise<{ seq: number }> {
    const what = `${body.op} of stream ${JSON.stringify(body.stream)}`;
    if (closed) return Promise.reject(new ClientError('closed', `${what}: the client is closed`, body.stream));
    const checked = parseBounded(ClientMessage, { ...body, id: 0 });
    if (!checked.success) {
      return Promise.reject(new ClientError('invalid_message', `${what} is not a valid message: ${describeIssues(checked.issues, checked.partial)}`, body.stream));
    }
    let answer: Promise<{ seq: number }>;
    try {
      answer = requests.add(body);
    } catch (error) {
      return Promise.reject(new ClientError('invalid_message', `${what} cannot be sent as JSON: ${errorText(error)}`, body.stream));
    }
    if (driver.isOpen) sendWaitingRequests();
    else driver.connect(); // the request waits for the open
    return answer;
  }

  const closedStream = (stream: string) => throwError(() => new ClientError('closed', `stream ${JSON.stringify(stream)}: the client is closed`, stream));

  return {
    connectionState$: driver.state.pipe(
      map((state) => state.value),
      distinctUntilChanged(),
    ),
    errors$: errors.asObservable(),
    state$: <S>(stream: string) => defer(() => (closed ? closedStream(stream) : (viewOf(stream).state$ as Observable<S>))),
    derived$: <D>(stream: string) => defer(() => (closed ? closedStream(stream) : (viewOf(stream).derived$ as Observable<D>))),
    runes$: (stream: string) => defer(() => (closed ? closedStream(stream) : viewOf(stream).runes$)),
    spawn: (stream, machine, input) => request({ op: 'spawn', stream, machine, ...(input === undefined ? {} : { input }) }),
    dispatch: (stream, event) => request({ op: 'dispatch', stream, event }),
    close() {
      if (!closed) {
        closed = true;
        requests.rejectAll(new ClientError('closed', 'the client was closed before the server answered'));
        const socketClosed = driver.close();
        for (const view of [...views.values()]) view.complete();
        views.clear();
        errors.complete();
        return socketClosed;
      }
      return driver.close();
    },
  };
}

const unexpected = (message: ServerMessage): ClientError =>
  new ClientError('unexpected_message', `the server answered a request this client is not waiting for: ${JSON.stringify(message)}`);
