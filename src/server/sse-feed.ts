import type { ServerResponse } from 'node:http';
import type { Subscription } from 'rxjs';
import type { Rune } from '../reducers/rune.js';
import type { Engine } from '../streams/engine.js';
import { streamNotices, type StreamNotice } from '../streams/notices.js';
import type { Snapshot } from '../streams/store.js';
import { DerivedView, derivingMachine } from './derived-view.js';
import { sseEventsOf } from './notices.js';
import type { PartialResponse } from './options.js';
import { readFailureOf } from './read-failure.js';

/**
 * The events of one open SSE response, from the runes after a seq.
 *
 * 1. Replay: the runes already stored when it (re)subscribes are written as fast as the socket
 *    takes them and never cut: when `res.write` says the socket is full it unsubscribes, and on
 *    `'drain'` it subscribes again after the last rune it wrote. The server holds at most one
 *    socket buffer of it, however far back the client resumes.
 * 2. Live: the runes after those. A client that lets more than `maxBufferedBytes` of them pile up
 *    is disconnected; it resumes from its `Last-Event-ID` with no gap.
 * 3. Where the runes after the seq were pruned by retention, it goes on from the current state.
 *    A replay that fails otherwise (a damaged archive) writes an `error` event, `{code, message}`
 *    (`checksum_mismatch` naming the segment, ...), and ends the response.
 * 4. A `stopped` event waits for its `partial_response` (`partialResponse`, when the server has
 *    one): the feed holds, subscribed to nothing, until the text is known, then goes on.
 * 5. A stream whose machine has a `derive` (an agent session's UI flags) gets a `derived` event:
 *    first the current view (no `id`, so a resuming client's `Last-Event-ID` stays where it was),
 *    then after each later rune that changes it (with that rune's seq).
 */
export class SseFeed {
  private subscription: Subscription | undefined;
  /** The seq of the last rune handled (written, or without events). */
  private lastSeq: number;
  /** Runes up to this seq were stored before the feed (re)subscribed: replay, paced, never cut. */
  private replayUntil: number;
  /** Waiting for the socket to drain, subscribed to nothing. */
  private paused = false;
  /** Already jumped over runes pruned by retention: a second failure ends the response. */
  private jumped = false;
  /** The stream's derived view, when its machine has a `derive`. */
  private view: DerivedView | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly engine: Engine,
    private readonly stream: string,
    afterSeq: number,
    head: Snapshot,
    private readonly maxBufferedBytes: number,
    private readonly partialResponse: PartialResponse | undefined,
  ) {
    this.lastSeq = afterSeq;
    this.replayUntil = head.seq;
    res.once('close', () => this.subscription?.unsubscribe());
    this.deriveFrom(head);
    this.follow();
  }

  /** Writes a comment line (a heartbeat), unless the socket is full anyway. */
  comment(text: string): void {
    if (!this.paused) this.writeLive(`: ${text}\n\n`);
  }

  private follow(): void {
    if (this.res.destroyed) return;
    const { res, engine } = this;
    const subscription = engine.runes$(this.stream, { afterSeq: this.lastSeq }).subscribe({
      next: (rune) => {
        if (this.paused) return;
        const notices = streamNotices(rune, engine.machines);
        if (this.partialResponse !== undefined && notices.some((notice) => notice.type === 'stopped')) return this.holdForPartial(rune, notices, this.partialResponse);
        this.lastSeq = rune.seq;
        this.write(rune, this.eventsOf(rune, notices));
      },
      error: (error: unknown) => {
        const failure = readFailureOf(this.stream, error);
        if (failure !== undefined) {
          if (!res.writableEnded) res.write(`event: error\ndata: ${JSON.stringify(failure)}\n\n`);
          return void res.end();
        }
        if (this.jumped || res.destroyed) return void res.end();
        this.jumped = true;
        // The runes after lastSeq are gone (retention): go on from the current state.
        this.resubscribe((now) => {
          this.lastSeq = now.seq;
          this.deriveFrom(now);
        });
      },
      complete: () => res.end(), // the engine closed
    });
    this.subscription = subscription;
    if (this.paused) subscription.unsubscribe(); // it filled the socket before subscribe returned
  }

  /** Starts the derived view over from a state the server read, and sends it. */
  private deriveFrom(snapshot: Snapshot): void {
    const machine = derivingMachine(this.engine, this.stream);
    if (machine === undefined) return;
    this.view = new DerivedView(machine, snapshot.seq, snapshot.state);
    this.writeLive(`event: derived\ndata: ${this.view.json}\n\n`);
  }

  /** The rune's events: its notices, then its derived view if the rune changed it. */
  private eventsOf(rune: Rune, notices: readonly StreamNotice[]): string {
    const derived = this.view?.after(rune);
    return sseEventsOf(rune, notices) + (derived === undefined ? '' : `id: ${rune.seq}\nevent: derived\ndata: ${derived}\n\n`);
  }

  /** Writes a rune's text: live, or replayed (paced by the socket). */
  private write(rune: Rune, text: string): void {
    if (text === '') return;
    if (rune.seq > this.replayUntil) return this.writeLive(text);
    if (!this.res.write(text)) this.pauseUntilDrain();
  }

  /** Holds the feed until the rune's `stopped` notices have their partial response, writes them, and goes on. */
  private holdForPartial(rune: Rune, notices: readonly StreamNotice[], partialResponse: PartialResponse): void {
    this.paused = true;
    this.subscription?.unsubscribe();
    const written = (partial: string): void => {
      if (this.res.destroyed) return;
      const filled = notices.map((notice) => (notice.type === 'stopped' ? { ...notice, data: { ...notice.data, partial_response: partial } } : notice));
      this.lastSeq = rune.seq;
      this.paused = false;
      this.write(rune, this.eventsOf(rune, filled));
      if (!this.paused) this.resubscribe();
    };
    // A resolver that fails leaves the text empty rather than the client without its event.
    partialResponse(rune).then(written, () => written(''));
  }

  private pauseUntilDrain(): void {
    this.paused = true;
    this.subscription?.unsubscribe();
    this.res.once('drain', () => this.resubscribe());
  }

  /** Subscribes again after `lastSeq`; whatever is stored by now is replay too. */
  private resubscribe(from?: (now: Snapshot) => void): void {
    this.engine.snapshot(this.stream).then(
      (now) => {
        if (now === undefined || this.res.destroyed) return void this.res.end();
        from?.(now);
        this.replayUntil = Math.max(this.replayUntil, now.seq);
        this.paused = false;
        this.follow();
      },
      () => this.res.end(),
    );
  }

  private writeLive(text: string): void {
    if (this.res.writableEnded) return;
    this.res.write(text);
    if (this.res.writableLength > this.maxBufferedBytes) this.res.destroy();
  }
}
