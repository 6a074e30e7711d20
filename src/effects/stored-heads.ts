import { Observable, defer, retry, timer } from 'rxjs';
import type { Rune } from '../reducers/rune.js';
import type { EpicContext } from '../streams/epic.js';
import type { HeadsQuery, StreamHead } from '../streams/store.js';

/** Options of {@link storedHeads}. */
export interface StoredHeadsOptions {
  /**
   * Called with the first live rune of each stream heard while the listing runs: the listing
   * skips that stream, so this is where an epic decides from the rune itself (a rune that moves
   * a call from `executing` to `executing`, say, shows an execution older than this process).
   */
  readonly firstLive?: (rune: Rune) => void;
  /** First delay before a failed listing is tried again; it doubles, at most 30 s. Default 1,000 ms. */
  readonly retryBaseMs?: number;
}

const RETRY_MAX_MS = 30_000;

/**
 * The stored streams an epic must resume when it starts (the Moorex idea: effects follow from
 * state, so a restart re-derives them): the heads `query` matches, from `context.streams`.
 *
 * 1. A stream heard live (in `live$`) before the listing reaches it is skipped: this process is
 *    handling it already, and the listing may be older than what it heard (a store whose listing
 *    takes real time). Its first live rune goes to `firstLive`.
 * 2. A listing that fails is tried again after `retryBaseMs`, doubling up to 30 s, on the
 *    context's scheduler, inside this observable: the epic's running effects are never torn down
 *    by it. Heads emitted before the failure may come again, so what follows must be idempotent.
 * 3. Completes after the last head, and stops hearing `live$` then.
 */
export function storedHeads(live$: Observable<Rune>, context: EpicContext, query: HeadsQuery, options: StoredHeadsOptions = {}): Observable<StreamHead> {
  const { firstLive, retryBaseMs = 1000 } = options;
  return new Observable<StreamHead>((subscriber) => {
    const heardLive = new Set<string>();
    const live = live$.subscribe((rune) => {
      if (heardLive.has(rune.stream)) return;
      heardLive.add(rune.stream);
      firstLive?.(rune);
    });
    const listing = defer(() => context.streams(query))
      .pipe(retry({ delay: (_error: unknown, attempt: number) => timer(Math.min(RETRY_MAX_MS, retryBaseMs * 2 ** (attempt - 1)), context.scheduler) }))
      .subscribe({
        next: (head) => {
          if (!heardLive.has(head.stream)) subscriber.next(head);
        },
        complete: () => {
          live.unsubscribe();
          subscriber.complete();
        },
      });
    return () => {
      live.unsubscribe();
      listing.unsubscribe();
    };
  });
}
