import { WebSocket, type RawData } from 'ws';
import type { DispatchOptions, DispatchResult } from '../streams/engine.js';
import { approvedBy, askAuthorize, clientOriginOf, dispatchAction, type AccessAction, type AccessDetails, type AccessGate, type AccessRequest } from './access.js';
import { sentChannel, slowClientChannel, type SentReport, type SlowClientReport } from './diagnostics.js';
import type { Fanout } from './fanout.js';
import { decodeFrame, encodeMessage, errorMessage } from './frames.js';
import { InOrder } from './in-order.js';
import type { ResolvedServerOptions } from './options.js';
import { CLOSE_CODES, type ClientMessage, type DispatchMessage, type ErrorMessage, type ServerMessage, type SpawnMessage } from './protocol.js';
import { rateLimitMessage, tokenBucket, type TokenBucket } from './rate-limit.js';
import { failureCodeOf } from './read-failure.js';
import { StreamSubscription, type SubscriptionOutput } from './subscription.js';
import { errorText } from '../reducers/error-text.js';

const TEXT = { binary: false } as const;

const toBuffer = (data: RawData): Buffer => (Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data));

/**
 * One WebSocket client: reads its requests, answers them, and sends the frames of the streams
 * it subscribed to. Nothing a client sends can throw past it.
 *
 * - Requests take effect in arrival order, even when the `authorize` hook is asynchronous.
 * - `spawn` and `dispatch` spend a token of the connection's rate limit. A spawn of a machine
 *   not in `spawnable` is refused `forbidden`; `authorize` is asked `drive` with `{machine}` for a
 *   spawn, and `drive` (or `approve`, for an approval's answer) with `{event}` for a dispatch. An
 *   `approved` event is dispatched with `approver` set to the connection's identity's id.
 * - Past `maxBufferedBytes` of outbound data, the `slowClient` policy applies: `'close'` closes
 *   with 4008; `'coalesce'` holds every subscription (no runes) and stops reading requests until
 *   the buffer has drained (a ping's write callback says so), then resynchronizes each
 *   subscription with a snapshot.
 * - `reauthorize` applies a revocation: a credential that no longer verifies closes the
 *   connection with 4001, a subscription `authorize` now refuses is ended with `forbidden`.
 * - At most `maxSubscriptions` streams and `maxRequestsInFlight` unanswered requests; past
 *   them a request is answered at once with `too_many_subscriptions` or `too_many_requests`.
 *   Once it closes, its queued requests are dropped: the `authorize` hook is not asked for them.
 */
export class ClientConnection {
  private readonly subscriptions = new Map<string, StreamSubscription>();
  private readonly bucket: TokenBucket;
  private readonly inOrder = new InOrder();
  /** Whether the client answered the last heartbeat ping (or drained its buffer since). */
  private alive = true;
  /** Over the high-water mark, waiting for the buffer to drain ('coalesce'). */
  private draining = false;
  private closed = false;
  /** Closed with 4008 and waiting for the close frame to get through; the next heartbeat terminates it. */
  private closingSlow = false;
  /** Requests received and not answered yet (see `maxRequestsInFlight`). */
  private inFlight = 0;
  private readonly output: SubscriptionOutput = {
    send: (frame) => this.send(frame),
    fail: (subscription, error) => {
      if (this.subscriptions.get(subscription.stream) === subscription) this.subscriptions.delete(subscription.stream);
      this.sendMessage(error);
    },
  };
  /** Resolves once the socket has closed. */
  readonly closedPromise: Promise<void>;

  /** The streams it is subscribed to now (for metrics). */
  get subscriptionCount(): number {
    return this.subscriptions.size;
  }

  constructor(
    readonly id: number,
    private readonly ws: WebSocket,
    private access: AccessRequest,
    private readonly fanout: Fanout,
    private readonly options: ResolvedServerOptions,
  ) {
    this.bucket = tokenBucket(options.dispatchRate, options.scheduler);
    ws.on('message', (data, isBinary) => this.receive(data, isBinary));
    ws.on('pong', () => (this.alive = true));
    // ws reports protocol errors (a frame over maxPayload: 1009, invalid UTF-8: 1007) and closes
    // the socket itself; 'close' follows.
    ws.on('error', () => undefined);
    this.closedPromise = new Promise((resolve) =>
      ws.once('close', () => {
        this.dispose();
        resolve();
      }),
    );
  }

  /**
   * A heartbeat tick: pings it; one that missed the last ping is terminated, or closed with 4008
   * if it is behind on what we sent (then terminated at the next tick if that close is stuck).
   */
  heartbeat(): void {
    if (this.closingSlow) return void this.ws.terminate(); // its close frame stayed stuck behind a whole beat
    if (this.closed) return;
    if (!this.alive) {
      // Behind on what we sent: the pong may be stuck behind it; it gets a code and a reason.
      if (this.draining || this.ws.bufferedAmount > 0) return this.closeSlow();
      this.ws.terminate(); // nothing pending and no pong: a dead peer cannot take a closing handshake
      return;
    }
    this.alive = false;
    this.ws.ping();
  }

  /** Closes with 1001 (going away); a client that is not reading is terminated instead. Resolves once closed. */
  shutdown(): Promise<void> {
    if (this.draining || this.ws.bufferedAmount > 0) this.ws.terminate();
    else this.ws.close(1001, 'server closing');
    return this.closedPromise;
  }

  /**
   * Verifies the connection's credential again (closing it with 4001 `unauthorized` if it no
   * longer verifies, or if the hook fails), then, in request order, asks `authorize` again to
   * `see` each live subscription as the identity it now verifies as: each refused (or failing)
   * is ended with an `error` naming the stream, and no more of its runes are sent.
   */
  async reauthorize(gate: AccessGate): Promise<void> {
    if (this.closed) return;
    const identity = await gate.identify(this.access);
    if (this.closed) return;
    if (identity === undefined || identity === 'failed') {
      this.dispose();
      this.ws.close(CLOSE_CODES.unauthorized, 'unauthorized');
      return;
    }
    this.access = { ...this.access, identity };
    await new Promise<void>((resolve) =>
      this.inOrder.run(
        () => {
          const subscriptions = [...this.subscriptions.values()];
          const answers = subscriptions.map(async (s) => askAuthorize(this.options.authorize, this.access, s.stream, 'see'));
          return Promise.all(answers).then((settled) => settled.map((answer, i) => ({ subscription: subscriptions[i]!, answer })));
        },
        (verdicts) => {
          for (const { subscription, answer } of verdicts) if (answer !== true) this.revoke(subscription, answer);
          resolve();
        },
      ),
    );
  }

  private revoke(subscription: StreamSubscription, answer: false | 'failed'): void {
    const { stream } = subscription;
    if (this.closed || this.subscriptions.get(stream) !== subscription) return;
    subscription.close();
    this.subscriptions.delete(stream);
    const message = answer === false ? `access to stream "${stream}" was revoked` : `the authorization hook failed for stream "${stream}"; its subscription was ended`;
    this.sendMessage(errorMessage(answer === false ? 'forbidden' : 'internal', message, { stream }));
  }

  // --- requests ----------------------------------------------------------------------------------

  private receive(data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    try {
      const decoded = decodeFrame(toBuffer(data), isBinary, this.options.maxFrameBytes);
      if (!decoded.ok) return this.sendMessage(decoded.error);
      this.handle(decoded.message);
    } catch (error) {
      this.sendMessage(errorMessage('internal', `the server failed on this frame: ${errorText(error)}`));
    }
  }

  private handle(message: ClientMessage): void {
    const about = 'id' in message ? { id: message.id, stream: message.stream } : { stream: message.stream };
    const { maxRequestsInFlight } = this.options;
    if (this.inFlight >= maxRequestsInFlight) {
      const text = `too many requests in flight: at most ${maxRequestsInFlight} requests of one connection may wait for their answer (maxRequestsInFlight); wait for answers before sending more`;
      return this.sendMessage(errorMessage('too_many_requests', text, about));
    }
    this.inFlight++;
    const answered = (): void => void this.inFlight--;
    switch (message.op) {
      case 'spawn':
      case 'dispatch': {
        if (!this.bucket.take()) {
          answered();
          return this.sendMessage(errorMessage('rate_limited', rateLimitMessage(this.options.dispatchRate), about));
        }
        const { spawnable, engine } = this.options;
        // A machine the engine does not host is the engine's to refuse (unknown_machine).
        if (message.op === 'spawn' && !spawnable.includes(message.machine) && Object.hasOwn(engine.machines, message.machine)) {
          answered();
          const text = `clients of this server may not spawn machine ${JSON.stringify(message.machine.slice(0, 64))}: the machines they may spawn are ${spawnable.join(', ') || '(none)'} (spawnable)`;
          return this.sendMessage(errorMessage('forbidden', text, about));
        }
        const action = message.op === 'spawn' ? 'drive' : dispatchAction(message.event.type);
        const details: AccessDetails = message.op === 'spawn' ? { machine: message.machine } : { event: message.event.type };
        return this.whenAllowed(message.stream, action, about, answered, () => this.drive(message, answered), details);
      }
      case 'subscribe':
        return this.whenAllowed(message.stream, 'see', about, answered, () => {
          answered();
          this.subscribe(message.stream, message.afterSeq);
        });
      case 'unsubscribe':
        return this.inOrder.run(
          () => true,
          () => {
            answered();
            this.unsubscribe(message.stream);
          },
        );
    }
  }

  /**
   * Runs `then` if the hook allows `action` on `stream`, in request order; else answers
   * `forbidden` (or `internal`) and calls `refused`.
   */
  private whenAllowed(
    stream: string,
    action: AccessAction,
    about: { id?: string | number; stream: string },
    refused: () => void,
    then: () => void,
    details?: AccessDetails,
  ): void {
    this.inOrder.run(
      () => askAuthorize(this.options.authorize, this.access, stream, action, details),
      (answer) => {
        if (this.closed) return;
        if (answer === true) return then();
        refused();
        // The same words whether or not the stream exists: a refusal reveals nothing.
        if (answer === false) return this.sendMessage(errorMessage('forbidden', `not allowed to ${action} stream "${stream}"`, about));
        this.sendMessage(errorMessage('internal', `the authorization hook failed for stream "${stream}"`, about));
      },
    );
  }

  /** What this connection's runes record they came from: the client, as the identity it is now (made once per identity). */
  private asClient(): DispatchOptions {
    const { identity } = this.access;
    if (this.origin === undefined || this.origin.identity !== identity) this.origin = { identity, options: { origin: clientOriginOf(identity) } };
    return this.origin.options;
  }
  private origin: { identity: AccessRequest['identity']; options: DispatchOptions } | undefined;

  private drive(message: SpawnMessage | DispatchMessage, answered: () => void): void {
    const { engine } = this.options;
    const about = { id: message.id, stream: message.stream };
    let driven: ((accepted: boolean) => void) | undefined;
    let result: Promise<DispatchResult>;
    try {
      driven = this.options.onDrive?.(this.access.identity, message);
      // Called synchronously, so requests reach the engine in arrival order.
      // An approval is recorded as the authenticated identity's, never as the client wrote it.
      result =
        message.op === 'spawn'
          ? engine.spawn(message.stream, message.machine, message.input, this.asClient())
          : engine.dispatch(message.stream, approvedBy(message.event, this.access.identity), this.asClient());
    } catch (error) {
      result = Promise.reject(error);
    }
    result.then(
      (outcome) => {
        answered();
        driven?.(outcome.accepted);
        this.sendMessage(outcome.accepted ? { op: 'ack', id: message.id, seq: outcome.rune.seq } : errorMessage(outcome.code, outcome.reason, about));
      },
      (error: unknown) => {
        answered();
        driven?.(false);
        this.sendMessage(errorMessage(failureCodeOf(error), `nothing was appended: ${errorText(error)}`, about));
      },
    );
  }

  private subscribe(stream: string, afterSeq: number | undefined): void {
    let subscription = this.subscriptions.get(stream);
    if (subscription === undefined) {
      const { maxSubscriptions } = this.options;
      if (this.subscriptions.size >= maxSubscriptions) {
        const text = `too many subscriptions: at most ${maxSubscriptions} streams per connection (maxSubscriptions); unsubscribe from one first`;
        return this.sendMessage(errorMessage('too_many_subscriptions', text, { stream }));
      }
      subscription = new StreamSubscription(stream, this.options.engine, this.fanout, this.output);
      this.subscriptions.set(stream, subscription);
    }
    // Over the mark, it waits for the drain like the others, and then starts from a snapshot.
    if (this.draining) subscription.hold();
    else subscription.start(afterSeq);
  }

  private unsubscribe(stream: string): void {
    this.subscriptions.get(stream)?.close();
    this.subscriptions.delete(stream);
  }

  // --- sending and backpressure ------------------------------------------------------------------

  private sendMessage(message: ServerMessage | ErrorMessage): void {
    this.send(encodeMessage(message));
  }

  private send(frame: Buffer): void {
    if (this.closed || this.ws.readyState !== WebSocket.OPEN) return;
    this.ws.send(frame, TEXT);
    const bufferedAmount = this.ws.bufferedAmount;
    if (sentChannel.hasSubscribers) sentChannel.publish({ connection: this.id, bytes: frame.length, bufferedAmount } satisfies SentReport);
    if (bufferedAmount > this.options.maxBufferedBytes) this.overMark(bufferedAmount);
  }

  private overMark(bufferedAmount: number): void {
    if (this.draining) return;
    const policy = this.options.slowClient;
    if (slowClientChannel.hasSubscribers) slowClientChannel.publish({ connection: this.id, policy, bufferedAmount } satisfies SlowClientReport);
    if (policy === 'close') return this.closeSlow();
    this.draining = true;
    this.ws.pause(); // no more requests, so no more answers, until it drains
    for (const subscription of this.subscriptions.values()) subscription.hold();
    // Written after everything buffered before it: its callback says the buffer has drained.
    this.ws.ping(undefined, undefined, (error?: Error) => {
      if (error === undefined || error === null) this.drained();
    });
  }

  private drained(): void {
    if (this.closed || !this.draining) return;
    this.draining = false;
    this.alive = true; // it read everything up to the ping: it is alive, even if its pong waits behind our pause
    this.ws.resume();
    for (const subscription of this.subscriptions.values()) subscription.start();
  }

  /** Closes with 4008 `slow_client`: the close frame goes out behind what is buffered. */
  private closeSlow(): void {
    this.dispose();
    this.closingSlow = true;
    this.ws.close(CLOSE_CODES.slowClient, 'slow_client');
    this.ws.resume(); // read its closing handshake ('coalesce' paused reading); its requests are ignored now
  }

  private dispose(): void {
    if (this.closed) return;
    this.closed = true;
    this.inOrder.cancel(); // its queued requests are dropped: no hook is asked for a client that left
    for (const subscription of this.subscriptions.values()) subscription.close();
    this.subscriptions.clear();
  }
}
