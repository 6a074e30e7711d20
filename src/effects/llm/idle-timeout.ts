import { Observable, type MonoTypeOperatorFunction, type SchedulerLike, type Subscription } from 'rxjs';

/**
 * Errors with `error()` when the source emits nothing for `ms` (from subscription, then from each
 * value), on `scheduler`. Like rxjs `timeout({ each })`, but a value costs a clock reading, not a
 * timer cancelled and armed again: one timer per quiet period, whatever the number of values (a
 * model streams thousands of deltas).
 *
 * @example
 * ```ts
 * parts$.pipe(idleTimeout(120_000, asyncScheduler, () => new Error('the provider hangs')));
 * ```
 */
export function idleTimeout<T>(ms: number, scheduler: SchedulerLike, error: () => unknown): MonoTypeOperatorFunction<T> {
  return (source) =>
    new Observable<T>((subscriber) => {
      let lastAt = scheduler.now();
      let timer: Subscription | undefined;
      const arm = (delay: number): void => {
        timer = scheduler.schedule(() => {
          const idle = scheduler.now() - lastAt;
          if (idle >= ms) subscriber.error(error());
          else arm(ms - idle); // a value came meanwhile: wait out the rest of its quiet period
        }, delay);
      };
      arm(ms);
      const subscription = source.subscribe({
        next: (value) => {
          lastAt = scheduler.now();
          subscriber.next(value);
        },
        error: (err: unknown) => subscriber.error(err),
        complete: () => subscriber.complete(),
      });
      return () => {
        subscription.unsubscribe();
        timer?.unsubscribe();
      };
    });
}
