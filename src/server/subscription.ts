import { takeWhile, type Subscription } from 'rxjs';
import type { Engine } from '../streams/engine.js';
import type { Fanout, FeedListener, StreamFeed } from './fanout.js';
import { derivingMachine } from './derived-view.js';
import { encodeMessage, errorMessage } from './frames.js';
import type { ErrorMessage, ProtocolErrorCode } from './protocol.js';
import { errorText } from '../reducers/error-text.js';
import { failureCodeOf, readFailureOf } from './read-failure.js';

/** Where a subscription's frames go: its connection. */
export interface SubscriptionOutput {
  /** Sends one frame of the subscription (a rune or a snapshot). */
  send(frame: Buffer): void;
  /** The subscription ended on an error (unknown stream, a failed feed): tell the client, forget it. */
  fail(subscription: StreamSubscription, error: ErrorMessage): void;
}

type Mode = 'joining' | 'live' | 'held' | 'closed';

/**
 * One connection's subscription to one stream: a listener of the stream's shared feed that
 * first catches up to it.
 *
 * 1. Joining: frames of the feed are buffered. The client is brought to the feed's position
 *    (`lastSeq`): with `afterSeq`, by replaying the stored runes after it (a snapshot first where
 *    they were pruned); without, by a `snapshot` (which is never behind the feed). A replay that
 *    fails otherwise (a damaged archive: `checksum_mismatch`, ...) ends the subscription with an
 *    `error` of that code.
 * 2. Live: the buffered frames, then every frame of the feed, each seq once and in order (a frame
 *    the catch-up already covered is skipped).
 * 3. Held: the connection is over its high-water mark; frames are dropped until `start()` again,
 *    which resynchronizes the client with a snapshot.
 *
 * Every (re)start bumps a generation; an asynchronous step of an older generation does nothing.
 */
export class StreamSubscription implements FeedListener {
  private mode: Mode = 'joining';
  /** The seq of the last rune (or snapshot) sent to the client. */
  private sentSeq = 0;
  private buffered: { seq: number; frame: Buffer }[] = [];
  private generation = 0;
  private replay: { subscription: Subscription; settle: (completed: boolean) => void } | undefined;
  private readonly feed: StreamFeed;

  constructor(
    readonly stream: string,
    private readonly engine: Engine,
    private readonly fanout: Fanout,
    private readonly output: SubscriptionOutput,
  ) {
    this.feed = fanout.join(stream, this);
  }

  /** (Re)starts it: every rune after `afterSeq`, or without it a snapshot and every rune after. */
  start(afterSeq?: number): void {
    const generation = this.reset('joining');
    this.join(generation, afterSeq).catch((error: unknown) => {
      if (generation === this.generation) this.fail(failureCodeOf(error), `stream "${this.stream}": ${errorText(error)}`);
    });
  }

  /** Stops sending until the next `start()`: the connection cannot take more for now. */
  hold(): void {
    if (this.mode !== 'closed') this.reset('held');
  }

  /** Ends it: leaves the feed. */
  close(): void {
    this.reset('closed');
    this.fanout.leave(this.feed, this);
  }

  onFrame(seq: number, frame: Buffer): void {
    if (this.mode === 'live') this.deliver(seq, frame);
    else if (this.mode === 'joining') this.buffered.push({ seq, frame });
  }

  onFeedError(message: string): void {
    this.fail('internal', message);
  }

  private reset(mode: Mode): number {
    this.mode = mode;
    this.buffered = [];
    const replay = this.replay;
    this.replay = undefined;
    replay?.subscription.unsubscribe();
    replay?.settle(false);
    return ++this.generation;
  }

  private async join(generation: number, afterSeq: number | undefined): Promise<void> {
    const started = await this.feed.ready;
    if (generation !== this.generation) return;
    if (!started.ok) return this.fail(started.code, started.message);
    const boundary = this.feed.lastSeq;
    if (afterSeq === undefined) {
      if (!(await this.sendSnapshot(generation))) return;
    } else if (afterSeq <= boundary) {
      this.sentSeq = afterSeq;
    } else {
      // Ahead of the feed (which may lag the log while it starts): the feed's frames up to
      // afterSeq will be skipped. Ahead of the log itself, the client knows runes this log does
      // not have: a snapshot resets it.
      const head = await this.engine.snapshot(this.stream);
      if (generation !== this.generation) return;
      if (head !== undefined && afterSeq <= head.seq) this.sentSeq = afterSeq;
      else if (!(await this.sendSnapshot(generation))) return;
    }
    if (this.sentSeq < boundary) {
      const replayed = await this.replayTo(generation, boundary);
      if (generation !== this.generation) return;
      // The runes after sentSeq are gone (pruned by retention): a snapshot stands in for them.
      if (!replayed && !(await this.sendSnapshot(generation))) return;
      if (this.sentSeq < boundary) return this.fail('internal', `stream "${this.stream}": could not catch up to seq ${boundary}`);
    }
    this.mode = 'live';
    const buffered = this.buffered;
    this.buffered = [];
    for (const { seq, frame } of buffered) {
      if (generation !== this.generation) return;
      this.deliver(seq, frame);
    }
  }

  /** Sends the stream's current durable state; false if this generation is over meanwhile. */
  private async sendSnapshot(generation: number): Promise<boolean> {
    const snapshot = await this.engine.snapshot(this.stream);
    if (generation !== this.generation) return false;
    if (snapshot === undefined) {
      this.fail('unknown_stream', `unknown stream "${this.stream}"`);
      return false;
    }
    this.sentSeq = snapshot.seq;
    const derived = derivingMachine(this.engine, this.stream)?.derive(snapshot.state);
    this.output.send(encodeMessage({ op: 'snapshot', stream: this.stream, seq: snapshot.seq, state: snapshot.state, ...(derived === undefined ? {} : { derived }) }));
    return generation === this.generation; // the send may have put the connection over its mark
  }

  /** Sends the stored runes after `sentSeq` through `boundary`; false if they could not all be read. */
  private replayTo(generation: number, boundary: number): Promise<boolean> {
    return new Promise((resolve) => {
      let settled = false;
      const settle = (completed: boolean): void => {
        if (settled) return;
        settled = true;
        if (this.replay?.settle === settle) this.replay = undefined;
        resolve(completed);
      };
      const subscription = this.engine
        .runes$(this.stream, { afterSeq: this.sentSeq })
        .pipe(takeWhile((rune) => rune.seq < boundary, true))
        .subscribe({
          next: (rune) => {
            if (generation !== this.generation) return;
            this.sentSeq = rune.seq;
            this.output.send(encodeMessage({ op: 'rune', rune }));
          },
          error: (error: unknown) => {
            // Pruned runes: a snapshot stands in for them. Anything else (a damaged archive) ends the subscription with its code.
            const failure = readFailureOf(this.stream, error);
            if (failure === undefined || generation !== this.generation) return settle(false);
            this.fail(failure.code, failure.message);
          },
          complete: () => settle(true),
        });
      if (!settled) this.replay = { subscription, settle };
    });
  }

  private deliver(seq: number, frame: Buffer): void {
    if (seq <= this.sentSeq) return; // the catch-up sent it already
    // A gap cannot happen (the feed is gapless and the catch-up reaches it), but if it did, a
    // snapshot would mend it rather than leave the client silently behind.
    if (seq !== this.sentSeq + 1) return this.start();
    this.sentSeq = seq;
    this.output.send(frame);
  }

  private fail(code: ProtocolErrorCode, message: string): void {
    if (this.mode === 'closed') return;
    this.close();
    this.output.fail(this, errorMessage(code, message, { stream: this.stream }));
  }
}
