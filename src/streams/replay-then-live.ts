import { Observable } from 'rxjs';
import type { Rune } from '../reducers/rune.js';
import { StreamReadError } from './stream-read-error.js';

/** What {@link replayThenLive} reads from. */
export interface ReplayThenLiveSource {
  /** The stream, for error messages. */
  readonly stream: string;
  /** Replay the stored runes with `seq > afterSeq`. */
  readonly afterSeq: number;
  /** The stored runes with `seq > afterSeq`, in seq order, at most `limit` of them. */
  readonly read: (afterSeq: number, limit: number) => Promise<readonly Rune[]>;
  /** The stream's runes as they become durable. */
  readonly live$: Observable<Rune>;
  /** Runes read per call of `read`. Default 1000. */
  readonly pageSize?: number;
}

/**
 * One stream's runes after `afterSeq`: the stored ones, then the live ones, with no gap and no
 * duplicate at the boundary, however the two race.
 *
 * 1. Subscribes to `live$` first, buffering, so a rune made durable during the replay is not missed.
 * 2. Reads the store page by page from `afterSeq`, emitting each rune.
 * 3. Emits the buffered live runes, then every live rune as it comes.
 * 4. Emits each seq once, in order: a rune both read and heard live is dropped the second time. A
 *    rune that skips ahead errors with a `StreamReadError` coded `runes_missing`, naming the missing
 *    seqs: they were neither in the store when read nor heard live (pruned by retention, or written
 *    by another process).
 * 5. Completes when `live$` does (the engine closed), once the replay is over; a read that fails
 *    after `live$` completed (the store closed with the engine) ends it the same way, not as an error.
 *
 * @see Engine.runes$, which serves each stream's `runes$(stream, { afterSeq })` with it.
 */
export function replayThenLive(source: ReplayThenLiveSource): Observable<Rune> {
  const { stream, read, live$, pageSize = 1000 } = source;
  return new Observable<Rune>((subscriber) => {
    let last = source.afterSeq;
    let replaying = true;
    let liveEnded = false;
    const buffered: Rune[] = [];
    const emit = (rune: Rune): void => {
      if (rune.seq <= last) return; // read from the store and also heard live: once is enough
      if (rune.seq !== last + 1) {
        subscriber.error(
          new StreamReadError(
            'runes_missing',
            `stream "${stream}": runes ${last + 1}..${rune.seq - 1} were not in the store when read, nor heard live (pruned by retention, or written by another process)`,
          ),
        );
        return;
      }
      last = rune.seq;
      subscriber.next(rune);
    };
    const live = live$.subscribe({
      next: (rune) => (replaying ? buffered.push(rune) : emit(rune)),
      error: (error: unknown) => subscriber.error(error),
      // Ended during the replay (the engine closing): finish the replay first.
      complete: () => (replaying ? (liveEnded = true) : subscriber.complete()),
    });
    (async () => {
      for (;;) {
        const page = await read(last, pageSize);
        if (page.length === 0 || subscriber.closed) break;
        for (const rune of page) emit(rune);
      }
      replaying = false;
      for (const rune of buffered) emit(rune);
      buffered.length = 0;
      if (liveEnded) subscriber.complete();
    })().catch((error: unknown) => {
      // The live runes ended first (the engine closed, and its store with it): the replay ends too, as the live runes did.
      if (liveEnded) subscriber.complete();
      else subscriber.error(error);
    });
    return live;
  });
}
