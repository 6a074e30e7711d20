import { Observable, type OperatorFunction } from 'rxjs';
import type { EventObject, Machine } from '../reducers/machine.js';

/**
 * Folds a stream of events through a machine, emitting each new state: a `scan` over
 * `machine.transition` that emits only on change. A rejected event (the machine returned the
 * same object) emits nothing.
 *
 * 1. Starts from `initial` (default: `machine.initial()` for machines without input).
 * 2. For each event, computes `machine.transition(state, event)`.
 * 3. Emits the result when it is a new object, and keeps it as the state.
 *
 * Completion and errors of the source pass through; unsubscribing unsubscribes the source.
 *
 * ## Example
 * ```ts
 * import { of } from 'rxjs';
 * import { chatActor, reduceWith } from 'runestream';
 *
 * of(
 *   { type: 'ProcessInteraction', userId: '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21' } as const,
 *   { type: 'InactivityTimeout' } as const, // not allowed while running: no emission
 *   { type: 'InteractionComplete', success: true } as const,
 * ).pipe(reduceWith(chatActor)).subscribe((s) => console.log(s.value));
 * // Logs:
 * // running
 * // idle
 * ```
 *
 * @see {@link Machine.transition}
 */
export function reduceWith<S, E extends EventObject, I>(machine: Machine<S, E, I>, initial: S = machine.initial(undefined as I)): OperatorFunction<E, S> {
  return (source) =>
    new Observable<S>((subscriber) => {
      let state = initial;
      return source.subscribe({
        next: (event) => {
          const next = machine.transition(state, event);
          if (next !== state) {
            state = next;
            subscriber.next(next);
          }
        },
        error: (error: unknown) => subscriber.error(error),
        complete: () => subscriber.complete(),
      });
    });
}
