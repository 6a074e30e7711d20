import type { Subscription } from 'rxjs';
import type { Rune } from '../reducers/rune.js';
import type { Engine } from '../streams/engine.js';
import { encodeMessage } from './frames.js';
import type { ProtocolErrorCode } from './protocol.js';
import { failureCodeOf } from './read-failure.js';
import { errorText } from '../reducers/error-text.js';

/** How a feed started: listening to the stream, or why not. */
export type FeedStart = { ok: true } | { ok: false; code: ProtocolErrorCode; message: string };

/** One subscriber of a stream's feed: a connection's subscription to the stream. */
export interface FeedListener {
  /** A rune's frame: the same bytes for every listener of the stream, serialized once. */
  onFrame(seq: number, frame: Buffer): void;
  /** The feed failed (a store error, ...) and ended; the listener's subscription ends with it. */
  onFeedError(message: string): void;
}

/**
 * One stream's live runes, shared by every connection that watches it: one `engine.runes$`
 * subscription, and each rune serialized once into a `{op: "rune"}` frame that every listener
 * sends as it is.
 *
 * 1. Starts at the stream's durable head (`engine.snapshot`), then follows `runes$` after it.
 *    `lastSeq` is the last rune it has framed: a listener that joins catches up to it from the
 *    store (see {@link StreamSubscription}), buffering the frames that come meanwhile.
 * 2. Ends when its last listener leaves, when the engine closes, or on an error (told to each listener).
 */
export class StreamFeed {
  readonly listeners = new Set<FeedListener>();
  /** The seq of the last rune framed: where a joining listener must catch up to. */
  lastSeq = 0;
  /** Resolves once the feed listens to the stream (or could not). */
  readonly ready: Promise<FeedStart>;
  private subscription: Subscription | undefined;
  private ended = false;

  constructor(
    readonly stream: string,
    engine: Engine,
    private readonly onEnd: (feed: StreamFeed) => void,
  ) {
    this.ready = this.start(engine);
  }

  private async start(engine: Engine): Promise<FeedStart> {
    let head;
    try {
      head = await engine.snapshot(this.stream);
    } catch (error) {
      this.end();
      return { ok: false, code: failureCodeOf(error), message: `stream "${this.stream}": ${errorText(error)}` };
    }
    if (head === undefined) {
      this.end();
      return { ok: false, code: 'unknown_stream', message: `unknown stream "${this.stream}"` };
    }
    if (this.ended) return { ok: false, code: 'internal', message: `stream "${this.stream}": the feed ended while starting` };
    this.lastSeq = head.seq;
    this.subscription = engine.runes$(this.stream, { afterSeq: head.seq }).subscribe({
      next: (rune) => this.publish(rune),
      error: (error: unknown) => this.fail(error),
      complete: () => this.end(),
    });
    return { ok: true };
  }

  private publish(rune: Rune): void {
    const frame = encodeMessage({ op: 'rune', rune });
    this.lastSeq = rune.seq;
    for (const listener of this.listeners) listener.onFrame(rune.seq, frame);
  }

  private fail(error: unknown): void {
    const listeners = [...this.listeners];
    this.end();
    for (const listener of listeners) listener.onFeedError(`stream "${this.stream}": the live feed failed: ${errorText(error)}`);
  }

  /** Stops following the stream; the fanout forgets the feed. Idempotent. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.listeners.clear();
    this.subscription?.unsubscribe();
    this.onEnd(this);
  }
}

/** The feeds of every stream some connection watches, by stream id. */
export class Fanout {
  private readonly feeds = new Map<string, StreamFeed>();

  constructor(private readonly engine: Engine) {}

  /** Adds `listener` to the stream's feed, starting the feed if none runs. */
  join(stream: string, listener: FeedListener): StreamFeed {
    let feed = this.feeds.get(stream);
    if (feed === undefined) {
      feed = new StreamFeed(stream, this.engine, (ended) => {
        if (this.feeds.get(ended.stream) === ended) this.feeds.delete(ended.stream);
      });
      this.feeds.set(stream, feed);
    }
    feed.listeners.add(listener);
    return feed;
  }

  /** Removes `listener`; the feed ends with its last listener. */
  leave(feed: StreamFeed, listener: FeedListener): void {
    feed.listeners.delete(listener);
    if (feed.listeners.size === 0) feed.end();
  }

  /** How many streams have a feed running. */
  get size(): number {
    return this.feeds.size;
  }
}
