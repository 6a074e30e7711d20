import { Observable, type MonoTypeOperatorFunction, type SchedulerLike, type Subscription } from 'rxjs';

/**
 * Errors with `error()` when the source emits nothing for `ms` (from subscription, then from each
 * value), on `scheduler`. Like rxjs `timeout({ each })`, but a value costs a clock reading, not a
 * timer cancelled and armed again: one timer per quiet period, whatever the number of values (a
 * model streams thousands of deltas).
 *
 * @example
 * ```ts
 * import { NEVER, VirtualTimeScheduler, startWith } from 'rxjs';
 * import { idleTimeout } from './idle-timeout.js';
 *
 * const scheduler = new VirtualTimeScheduler(); // in production: asyncScheduler
 * const parts$ = NEVER.pipe(startWith('Hel')); // a provider that hangs after its first part
 * parts$.pipe(idleTimeout(120_000, scheduler, () => new Error('the provider hangs'))).subscribe({
 *   next: (part) => console.log(part, 'at', scheduler.now()),
 *   error: (error: Error) => console.log(error.message, 'at', scheduler.now()),
 * });
 * scheduler.flush();
 * // Logs: Hel at 0
 * //       the provider hangs at 120000
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
