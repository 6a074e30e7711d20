import { Observable, from, type ObservableInput, type OperatorFunction, type Subscription } from 'rxjs';

/**
 * Projects each value to an Observable and runs them one at a time per key, keys side by side: as
 * `groupBy(keyOf)` with `concatMap(project)` per group, but a key is forgotten as soon as its work
 * runs dry, so nothing has to decide when a group ends. (A group closed by a duration before the
 * work it queued is done lets the key's next value run beside that work; one never closed holds a
 * group per key for good.) A value whose key is `undefined` is skipped. The result completes once
 * the source has and every key's work is done; a `project` that throws, or an inner Observable
 * that errors, errors it. Unsubscribing stops every key's work.
 *
 * @example
 * ```ts
 * import { of, timer, map } from 'rxjs';
 * import { concatMapByKey } from './concat-map-by-key.js';
 *
 * // Per user, one request at a time; users side by side.
 * of({ user: 'a', n: 1 }, { user: 'b', n: 1 }, { user: 'a', n: 2 })
 *   .pipe(concatMapByKey((r) => r.user, (r) => timer(r.user === 'a' ? 20 : 10).pipe(map(() => `${r.user}${r.n}`))))
 *   .subscribe((done) => console.log(done));
 * // Logs: b1
 * //       a1
 * //       a2
 * ```
 */
export function concatMapByKey<T, R>(keyOf: (value: T) => string | undefined, project: (value: T) => ObservableInput<R>): OperatorFunction<T, R> {
  return (source) =>
    new Observable<R>((subscriber) => {
      /** Per key with work under way, the values waiting for it, in order. */
      const waiting = new Map<string, T[]>();
      /** Per key, its work running now (asynchronously). */
      const running = new Map<string, Subscription>();
      let sourceDone = false;

      /** Runs `key`'s waiting values one after another, until one is still running or none is left. */
      const drain = (key: string): void => {
        const queue = waiting.get(key)!;
        while (queue.length > 0) {
          // A subscriber that unsubscribed from inside a value it was given: nothing more starts.
          if (subscriber.closed) return;
          const value = queue.shift()!;
          let input: ObservableInput<R>;
          try {
            input = project(value);
          } catch (error) {
            subscriber.error(error);
            return;
          }
          let subscribing = true;
          let doneAtOnce = false;
          const work = from(input).subscribe({
            next: (result) => subscriber.next(result),
            error: (error: unknown) => subscriber.error(error),
            complete: () => {
              running.delete(key);
              // Done within `subscribe`: the loop goes on (no recursion per value); later, it starts again.
              if (subscribing) doneAtOnce = true;
              else drain(key);
            },
          });
          subscribing = false;
          if (!doneAtOnce) {
            if (!work.closed) running.set(key, work);
            return;
          }
        }
        waiting.delete(key);
        if (sourceDone && waiting.size === 0) subscriber.complete();
      };

      const subscription = source.subscribe({
        next: (value) => {
          const key = keyOf(value);
          if (key === undefined) return;
          const queue = waiting.get(key);
          if (queue !== undefined) queue.push(value);
          else {
            waiting.set(key, [value]);
            drain(key);
          }
        },
        error: (error: unknown) => subscriber.error(error),
        complete: () => {
          sourceDone = true;
          if (waiting.size === 0) subscriber.complete();
        },
      });
      return () => {
        subscription.unsubscribe();
        for (const work of running.values()) work.unsubscribe();
        running.clear();
        waiting.clear();
      };
    });
}
