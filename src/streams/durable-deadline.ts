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

/** A durable deadline as data: what {@link durableDeadline} arms. */
export interface DeadlineSpec<T = unknown> {
  readonly at: number;
  readonly value: T;
  readonly scheduler: SchedulerLike;
  readonly retryMs: number;
  readonly resolutionMs: number;
}

/** One timer wheel per scheduler and resolution: every deadline of an engine shares one scheduled action. */
const wheels = new WeakMap<SchedulerLike, Map<number, TimerWheel<ArmedDeadline>>>();

function sharedWheel(scheduler: SchedulerLike, resolutionMs: number): TimerWheel<ArmedDeadline> {
  let byResolution = wheels.get(scheduler);
  if (byResolution === undefined) wheels.set(scheduler, (byResolution = new Map()));
  let wheel = byResolution.get(resolutionMs);
  if (wheel === undefined) {
    wheel = timerWheel<ArmedDeadline>(scheduler, resolutionMs, (due) => {
      for (const armed of due) armed.fire();
    });
    byResolution.set(resolutionMs, wheel);
  }
  return wheel;
}

/**
 * A deadline armed on its scheduler's shared wheel: `due()` is called at `at`, then every
 * `retryMs`, until `disarm()`. A class, not closures: the effect host keeps one per idle stream,
 * a million of them at once.
 */
export abstract class ArmedDeadline<T = unknown> {
  private armed = false;
  constructor(readonly spec: DeadlineSpec<T>) {}

  /** Called when the deadline (or a retry of it) is due. */
  protected abstract due(value: T): void;

  arm(): void {
    this.armed = true;
    sharedWheel(this.spec.scheduler, this.spec.resolutionMs).set(this, this.spec.at);
  }

  disarm(): void {
    this.armed = false;
    sharedWheel(this.spec.scheduler, this.spec.resolutionMs).delete(this);
  }

  /** @internal Called by the wheel. */
  fire(): void {
    // Due in the same tick as a deadline whose emission disarmed this one: stay disarmed.
    if (!this.armed) return;
    const { scheduler, retryMs, resolutionMs } = this.spec;
    sharedWheel(scheduler, resolutionMs).set(this, scheduler.now() + retryMs);
    this.due(this.spec.value);
  }
}

const DEADLINE = Symbol('runestream.durableDeadline');

/** The deadline a {@link durableDeadline} Observable stands for, if it is one: the effect host arms it without a subscription. */
export const deadlineSpecOf = (effect: Observable<unknown>): DeadlineSpec | undefined => (effect as { [DEADLINE]?: DeadlineSpec })[DEADLINE];

/** Emits each time its deadline is due, to one subscriber. */
class SubscribedDeadline<T> extends ArmedDeadline<T> {
  constructor(
    spec: DeadlineSpec<T>,
    private readonly next: (value: T) => void,
  ) {
    super(spec);
  }
  protected due(value: T): void {
    this.next(value);
  }
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
 * 3. It is also data: given as an effect to `stateEffects` as it is, the host arms it on the wheel
 *    without subscribing (a few dozen bytes per idle stream, not an rxjs subscription).
 *
 * ## Example
 * ```ts
 * import { asyncScheduler } from 'rxjs';
 * import { durableDeadline } from 'runestream';
 * const lastRuneAt = asyncScheduler.now() - 5_000;
 * const subscription = durableDeadline(lastRuneAt + 1_000, { type: 'InactivityTimeout' }, { scheduler: asyncScheduler })
 *   .subscribe((event) => {
 *     console.log(event);
 *     subscription.unsubscribe();
 *   });
 * // Logs, within a second (the deadline has passed): { type: 'InactivityTimeout' }
 * ```
 */
export function durableDeadline<T>(at: number, value: T, options: DurableDeadlineOptions): Observable<T> {
  const { scheduler, retryMs = 60_000, resolutionMs = 1000 } = options;
  if (!(retryMs > 0)) throw new TypeError(`durableDeadline: "retryMs" must be positive, got ${String(retryMs)}`);
  if (!(resolutionMs > 0)) throw new TypeError(`durableDeadline: "resolutionMs" must be positive, got ${String(resolutionMs)}`);
  const spec: DeadlineSpec<T> = { at, value, scheduler, retryMs, resolutionMs };
  const deadline$ = new Observable<T>((subscriber) => {
    const armed = new SubscribedDeadline(spec, (due) => subscriber.next(due));
    armed.arm();
    return () => armed.disarm();
  });
  return Object.assign(deadline$, { [DEADLINE]: spec });
}
