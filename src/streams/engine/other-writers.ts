import { foldRune } from '../../reducers/fold.js';
import type { Rune } from '../../reducers/rune.js';
import { CALLER_ORIGIN } from '../../reducers/rune-origin.js';
import type { CommitQueue, PendingRune } from '../commit-queue.js';
import type { RuneStore } from '../store.js';
import { raceRetry, retrySink } from '../submit.js';
import { newerVersion, type Instance } from './instance.js';
import { existsReason, rejected } from './rejections.js';
import type { WaitingEvent } from './stream-home.js';

/** Runes read per page when a stream that lost a seq race is brought up to the store's head. */
const CATCH_UP_PAGE = 1000;

/** Folds another writer's durable rune, the one right after `instance`'s last, and publishes it as if committed here. */
export function foldTheirs(instance: Instance, rune: Rune, commits: CommitQueue<Instance>): void {
  instance.state = foldRune(instance.machine, instance.state, rune.seq, rune.event);
  instance.seq = rune.seq;
  if (rune.at > instance.at) instance.at = rune.at;
  commits.publish(instance, rune, instance.state);
}

/**
 * Folds the store's runes after `instance`'s last durable one into it, publishing each (a page at
 * a time, up to the head), while it is `current`; those heard from the tail meanwhile are folded
 * already and skipped.
 */
export async function readUp(store: RuneStore, instance: Instance, commits: CommitQueue<Instance>, current: () => boolean): Promise<Instance> {
  for (;;) {
    const page = await store.read(instance.stream, instance.durableSeq, CATCH_UP_PAGE);
    for (const rune of page) {
      if (!current()) return instance;
      const newer = newerVersion(rune, instance.machine);
      if (newer !== undefined) throw newer; // the instance leaves memory; the events waiting are refused
      if (rune.seq === instance.durableSeq + 1) foldTheirs(instance, rune, commits);
    }
    if (page.length < CATCH_UP_PAGE) return instance;
  }
}

/**
 * The runes of a stream that lost the seq race, sorted: the events to apply again (each with its
 * losses in a row counted), and the dispatches answered without another try (a spawn, or an event
 * that lost `maxRaceLosses` times in a row).
 */
export function triesAfterLoss(runes: readonly PendingRune<Instance>[], maxRaceLosses: number): { retries: WaitingEvent[]; answered: PendingRune<Instance>[] } {
  const retries: WaitingEvent[] = [];
  const answered: PendingRune<Instance>[] = [];
  for (const p of runes) {
    const retry = raceRetry(p.sink, p.token);
    if (p.rune.seq === 1 || retry.losses >= maxRaceLosses) answered.push(p);
    else retries.push({ event: p.rune.event, dispatchedAt: p.rune.at, origin: p.rune.origin ?? CALLER_ORIGIN, sink: retrySink, token: retry });
  }
  return { retries, answered };
}

/** Tells the dispatches answered without another try: a spawn that lost, `stream_exists`; an event that lost too often, `contention`. */
export function answerLosers(answered: readonly PendingRune<Instance>[], stream: string, maxRaceLosses: number): void {
  for (const { instance, rune, sink, token } of answered) {
    if (rune.seq === 1) sink.result(rejected('stream_exists', existsReason(instance.machine, stream)), token);
    else sink.result(rejected('contention', `stream "${stream}": another writer took its next seq ${maxRaceLosses} times in a row; nothing was appended`), token);
  }
}
