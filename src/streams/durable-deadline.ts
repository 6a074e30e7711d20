import { Observable, type SchedulerLike } from 'rxjs';
import { timerWheel, type TimerWheel } from './timer-wheel.js';

/** Options of {@link durableDeadline}. */
export interface DurableDeadlineOptions {
  /** The clock: the engine's scheduler (`context.scheduler`), so tests run in virtual time. */
  readonly scheduler: SchedulerLike;
  /**
   * While still subscribed this long after emitting, it emits again: the dispatch of what it
   * emitted left no rune (a store error), so its effect's key is still due. Default: 60,000 ms.
   */
  readonly retryMs?: number;
  /** How late it may fire: the bucket size of the shared timer wheel it joins. Default: 1,000 ms. */
  readonly resolutionMs?: number;
}

/** A wheel's keys are one object per armed deadline; firing calls it. */
type Armed = { fire(): void };

/** One timer wheel per scheduler and resolution: every deadline of an engine shares one scheduled action. */
const wheels = new WeakMap<SchedulerLike, Map<number, TimerWheel<Armed>>>();

function sharedWheel(scheduler: SchedulerLike, resolutionMs: number): TimerWheel<Armed> {
  let byResolution = wheels.get(scheduler);
  if (byResolution === undefined) wheels.set(scheduler, (byResolution = new Map()));
  let wheel = byResolution.get(resolutionMs);
  if (wheel === undefined) {
    wheel = timerWheel<Armed>(scheduler, resolutionMs, (due) => {
      for (const armed of due) armed.fire();
    });
    byResolution.set(resolutionMs, wheel);
  }
  return wheel;
}

/**
 * A deadline kept in the log: emits `value` once scheduler time reaches `at` (at once if it has
 * passed, as after a restart), then again every `retryMs` for as long as it stays subscribed.
 *
 * It is the one way an effect waits for a durable deadline (an inactivity timeout, an approval
 * timeout, a breaker's open timeout). `at` is computed from the log (a rune's `at` plus a timeout),
 * so a restart re-arms it at the same instant. Derived from state, the effect that holds it is
 * cancelled by the very rune its emission causes; if that dispatch fails, the state stays, the
 * deadline stays subscribed, and it tries again.
 *
 * 1. Every deadline joins one timer wheel per scheduler and `resolutionMs`: a million armed
 *    deadlines are a million map entries and one scheduled action.
 * 2. Unsubscribing disarms it. It never completes on its own.
 *
 * ## Example
 * ```ts
 * import { asyncScheduler } from 'rxjs';
 * import { durableDeadline } from 'runestream';
 * const lastRuneAt = asyncScheduler.now() - 5_000;
 * durableDeadline(lastRuneAt + 1_000, { type: 'InactivityTimeout' }, { scheduler: asyncScheduler })
 *   .subscribe((event) => console.log(event))
 *   .add(() => console.log('disarmed'));
 * // Logs, within a second (the deadline has passed): { type: 'InactivityTimeout' }
 * ```
 */
export function durableDeadline<T>(at: number, value: T, options: DurableDeadlineOptions): Observable<T> {
  const { scheduler, retryMs = 60_000, resolutionMs = 1000 } = options;
  if (!(retryMs > 0)) throw new TypeError(`durableDeadline: "retryMs" must be positive, got ${String(retryMs)}`);
  if (!(resolutionMs > 0)) throw new TypeError(`durableDeadline: "resolutionMs" must be positive, got ${String(resolutionMs)}`);
  return new Observable<T>((subscriber) => {
    const wheel = sharedWheel(scheduler, resolutionMs);
    const armed: Armed = {
      fire: () => {
        // Due in the same tick as a deadline whose emission unsubscribed this one: stay disarmed.
        if (subscriber.closed) return;
        wheel.set(armed, scheduler.now() + retryMs);
        subscriber.next(value);
      },
    };
    wheel.set(armed, at);
    return () => wheel.delete(armed);
  });
}
