import { Observable, catchError, defaultIfEmpty, of, take, type SchedulerLike, type Subscriber, type Subscription } from 'rxjs';
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
  /**
   * Whether the deadline still holds, read each time it is due and never before: so a deadline
   * armed from a stream's head alone can depend on what only a read tells (its last rune, say)
   * and still cost no read and no subscription while it waits. Its first value `false` drops the
   * deadline (nothing is emitted, now or later); a number later than now moves it there (it is
   * read again then: an inactivity clock that finds work done since it was armed); `true`, an
   * instant that has passed, no value or an error: it emits.
   */
  readonly holds$?: Observable<boolean | number>;
}

/** A durable deadline as data: what {@link durableDeadline} arms. */
export interface DeadlineSpec<T = unknown> {
  readonly at: number;
  readonly value: T;
  readonly scheduler: SchedulerLike;
  readonly retryMs: number;
  readonly resolutionMs: number;
  readonly holds$?: Observable<boolean | number>;
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

/** Read when a deadline with `holds$` is due: its first value, true when it gives none or fails. */
const holdsWhenDue = (holds$: Observable<boolean | number>): Observable<boolean | number> =>
  holds$.pipe(
    take(1),
    defaultIfEmpty(true),
    catchError(() => of(true)),
  );

/**
 * A deadline armed on its scheduler's shared wheel: `due()` is called at `at`, then every
 * `retryMs`, until `disarm()` (or until its `holds$`, read first each time, says it no longer
 * holds: then `dropped()`; or says a later instant: then it is due again there). A class, not
 * closures: the effect host keeps one per idle stream, a million of them at once.
 */
export abstract class ArmedDeadline<T = unknown> {
  private armed = false;
  /** The read of `holds$` under way, if any. */
  private checking: Subscription | undefined;
  constructor(readonly spec: DeadlineSpec<T>) {}

  /** Called when the deadline (or a retry of it) is due. */
  protected abstract due(value: T): void;

  /** Called once its `holds$` said it no longer holds: it is disarmed for good. */
  protected dropped(): void {}

  arm(): void {
    this.armed = true;
    sharedWheel(this.spec.scheduler, this.spec.resolutionMs).set(this, this.spec.at);
  }

  disarm(): void {
    this.armed = false;
    this.checking?.unsubscribe();
    this.checking = undefined;
    sharedWheel(this.spec.scheduler, this.spec.resolutionMs).delete(this);
  }

  /** @internal Called by the wheel. */
  fire(): void {
    // Due in the same tick as a deadline whose emission disarmed this one: stay disarmed.
    if (!this.armed) return;
    const { scheduler, retryMs, resolutionMs, holds$, value } = this.spec;
    // Due again unless what it emits ends it: a dispatch that failed is retried.
    sharedWheel(scheduler, resolutionMs).set(this, scheduler.now() + retryMs);
    if (holds$ === undefined) return this.due(value);
    this.checking?.unsubscribe();
    const checking = holdsWhenDue(holds$).subscribe((holds) => {
      this.checking = undefined;
      if (typeof holds === 'number' && holds > scheduler.now()) {
        if (this.armed) sharedWheel(scheduler, resolutionMs).set(this, holds);
        return;
      }
      if (holds !== false) return this.due(value);
      this.disarm();
      this.dropped();
    });
    // A read answered at once has ended already; one under way is cancelled by `disarm()`.
    if (!checking.closed) this.checking = checking;
  }
}

const DEADLINE = Symbol('runestream.durableDeadline');

/** The deadline a {@link durableDeadline} Observable stands for, if it is one: the effect host arms it without a subscription. */
export const deadlineSpecOf = (effect: Observable<unknown>): DeadlineSpec | undefined => (effect as { [DEADLINE]?: DeadlineSpec })[DEADLINE];

/** Emits each time its deadline is due, to one subscriber; completes when it no longer holds. */
class SubscribedDeadline<T> extends ArmedDeadline<T> {
  constructor(
    spec: DeadlineSpec<T>,
    private readonly subscriber: Subscriber<T>,
  ) {
    super(spec);
  }
  protected due(value: T): void {
    this.subscriber.next(value);
  }
  protected override dropped(): void {
    this.subscriber.complete();
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
 * 2. Unsubscribing disarms it. It never completes on its own, unless its `holds$` says it no longer
 *    holds: `holds$` is read each time it is due (never while it waits), and a first value `false`
 *    completes it without emitting; a later instant moves it there. A deadline armed from a
 *    stream's head alone reads there what the head does not tell (the chat actor's lifecycle:
 *    whether its last rune is a `Shutdown`, and when its chat last worked).
 * 3. It is also data: given as an effect to `stateEffects` as it is, the host arms it on the wheel
 *    without subscribing (a few dozen bytes per idle stream, not an rxjs subscription), `holds$`
 *    included (held as it is, subscribed only when due).
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
  const { scheduler, retryMs = 60_000, resolutionMs = 1000, holds$ } = options;
  if (!(retryMs > 0)) throw new TypeError(`durableDeadline: "retryMs" must be positive, got ${String(retryMs)}`);
  if (!(resolutionMs > 0)) throw new TypeError(`durableDeadline: "resolutionMs" must be positive, got ${String(resolutionMs)}`);
  const spec: DeadlineSpec<T> = holds$ === undefined ? { at, value, scheduler, retryMs, resolutionMs } : { at, value, scheduler, retryMs, resolutionMs, holds$ };
  const deadline$ = new Observable<T>((subscriber) => {
    const armed = new SubscribedDeadline(spec, subscriber);
    armed.arm();
    return () => armed.disarm();
  });
  return Object.assign(deadline$, { [DEADLINE]: spec });
}
