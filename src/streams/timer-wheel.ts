import type { SchedulerAction, SchedulerLike } from 'rxjs';

/** Deadlines for many keys on one scheduled action. */
export interface TimerWheel<K> {
  /** Arms (or moves) the key's deadline, in scheduler time. */
  set(key: K, deadline: number): void;
  /** Disarms the key. */
  delete(key: K): void;
  /** The key's deadline, if armed. */
  get(key: K): number | undefined;
  /** How many keys are armed. */
  readonly size: number;
  /** Disarms everything and cancels the scheduled action. */
  dispose(): void;
}

/**
 * A timer wheel: deadlines grouped in buckets of `resolutionMs`, with a single scheduled action
 * for the earliest bucket, so a million armed timers are a million map entries, not a million
 * scheduler actions. A key fires once its deadline has passed, at most `resolutionMs` late; all
 * keys due at one tick are passed to `fire` together, in the order they were armed.
 *
 * ## Example
 * ```ts
 * import { VirtualTimeScheduler } from 'rxjs';
 * import { timerWheel } from 'runestream';
 * const scheduler = new VirtualTimeScheduler(); // in production: asyncScheduler
 * const wheel = timerWheel<string>(scheduler, 1000, (due) => console.log('due', due, 'at', scheduler.now()));
 * wheel.set('chat-1', scheduler.now() + 600_000); // in 10 minutes
 * wheel.set('chat-2', scheduler.now() + 600_500); // fires at the next whole second: at most resolutionMs late
 * scheduler.schedule(() => wheel.set('chat-1', scheduler.now() + 600_000), 300_000); // moved: activity restarts the clock
 * scheduler.flush();
 * // Logs:
 * // due [ 'chat-2' ] at 601000
 * // due [ 'chat-1' ] at 900000
 * ```
 */
export function timerWheel<K>(scheduler: SchedulerLike, resolutionMs: number, fire: (due: K[]) => void): TimerWheel<K> {
  if (!(resolutionMs > 0)) throw new TypeError(`timerWheel: "resolutionMs" must be positive, got ${String(resolutionMs)}`);
  const deadlines = new Map<K, number>();
  const buckets = new Map<number, Set<K>>();
  let action: { at: number; handle: SchedulerAction<unknown> | { unsubscribe(): void } } | undefined;

  const bucketOf = (deadline: number): number => Math.ceil(deadline / resolutionMs) * resolutionMs;

  const unbucket = (key: K, deadline: number): void => {
    const bucket = buckets.get(bucketOf(deadline));
    bucket?.delete(key);
    if (bucket?.size === 0) buckets.delete(bucketOf(deadline));
  };

  /** Keeps exactly one action scheduled, at the earliest bucket. */
  const reschedule = (): void => {
    let earliest = Infinity;
    for (const at of buckets.keys()) if (at < earliest) earliest = at;
    if (action !== undefined && action.at === earliest) return;
    action?.handle.unsubscribe();
    action = undefined;
    if (earliest === Infinity) return;
    const at = earliest;
    action = { at, handle: scheduler.schedule(tick, Math.max(0, at - scheduler.now())) };
  };

  const tick = (): void => {
    action = undefined;
    const now = scheduler.now();
    const due: K[] = [];
    for (const [at, keys] of buckets) {
      if (at > now) continue;
      // A bucket's time is at or after each of its deadlines: every key in it is due.
      buckets.delete(at);
      for (const key of keys) {
        deadlines.delete(key);
        due.push(key);
      }
    }
    reschedule();
    if (due.length > 0) fire(due);
  };

  return {
    set(key, deadline) {
      const previous = deadlines.get(key);
      if (previous !== undefined) unbucket(key, previous);
      deadlines.set(key, deadline);
      const at = bucketOf(deadline);
      let bucket = buckets.get(at);
      if (bucket === undefined) buckets.set(at, (bucket = new Set()));
      bucket.add(key);
      // Earlier than the action, or the action's bucket emptied by the move: schedule anew.
      if (action === undefined || at < action.at || !buckets.has(action.at)) reschedule();
    },
    delete(key) {
      const previous = deadlines.get(key);
      if (previous === undefined) return;
      deadlines.delete(key);
      unbucket(key, previous);
      // The action's bucket emptied: cancel it, or move it to the next bucket.
      if (action !== undefined && !buckets.has(action.at)) reschedule();
    },
    get: (key) => deadlines.get(key),
    get size() {
      return deadlines.size;
    },
    dispose() {
      deadlines.clear();
      buckets.clear();
      action?.handle.unsubscribe();
      action = undefined;
    },
  };
}
