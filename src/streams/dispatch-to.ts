import { Observable, type OperatorFunction } from 'rxjs';
import type { DispatchResult, Engine } from './engine.js';
import type { DispatchSink } from './submit.js';

/**
 * Dispatches every event of the source to one stream of an engine, in order, and emits each
 * event's {@link DispatchResult} once its rune is durable, in source order. No promise is made per
 * event: the engine's `submit` tells one sink per subscription, with the event's index.
 *
 * 1. Each source event is dispatched as it arrives, through the same checks as `engine.dispatch`
 *    (the engine's `limits`, the machine's zod schema, the transition).
 * 2. Results are emitted in source order, each once its rune is durable: at once with the memory
 *    store, when its batch commits with a store that does I/O (`sqliteStore`). A rejected event is
 *    an emitted result, `{accepted: false, code, reason}`, and the stream goes on.
 * 3. A store failure (a commit the store refused, a stream that could not be loaded) errors the
 *    output with that error. A source error is passed on at once.
 * 4. Source completion completes the output after the last result. Unsubscribing stops
 *    dispatching further events; those already accepted stay durable.
 *
 * What is buffered: nothing of its own while results come in order. A synchronous source with a
 * store that does I/O is not slowed down: every event is applied at once and its rune waits in the
 * engine's batch queue (the buffer, one entry per event, as with `dispatch`) until the next turn
 * of the event loop commits it. A result that settles before an earlier one (a rejection behind
 * an accepted event still in a batch) is held until the earlier ones are emitted.
 *
 * ## Example
 * ```ts
 * import { from, lastValueFrom, toArray } from 'rxjs';
 * import { createEngine, dispatchTo } from 'runestream';
 * const engine = createEngine();
 * await engine.spawn('chat-1', 'chat-actor');
 * const results = await lastValueFrom(
 *   from([{ type: 'Pause', reason: 'lunch' }, { type: 'Nope' }, { type: 'Ping' }]).pipe(dispatchTo(engine, 'chat-1'), toArray()),
 * );
 * console.log(results.map((r) => (r.accepted ? r.rune.seq : r.code)));
 * // Logs: [ 2, 'unknown_event', 3 ]
 * await engine.close();
 * ```
 *
 * @see Engine.dispatch, the same with one promise per event.
 * @see Engine.state$, to watch the states these events make.
 */
export function dispatchTo(engine: Engine, stream: string): OperatorFunction<unknown, DispatchResult> {
  if (typeof (engine as Partial<Engine> | null)?.submit !== 'function') {
    throw new TypeError(`dispatchTo: "engine" must be an engine (with submit), got ${engine === null ? 'null' : typeof engine}`);
  }
  if (typeof stream !== 'string') throw new TypeError(`dispatchTo: "stream" must be a string, got ${typeof stream}`);
  return (source) =>
    new Observable<DispatchResult>((subscriber) => {
      /** Events dispatched, and results emitted: the next result to emit is the event at `emitted`. */
      let dispatched = 0;
      let emitted = 0;
      let sourceDone = false;
      /** Results that settled before an earlier one, by event index. */
      const early = new Map<number, DispatchResult>();
      const completeIfDone = (): void => {
        if (sourceDone && emitted === dispatched) subscriber.complete();
      };
      const sink: DispatchSink<number> = {
        result: (result, index) => {
          if (subscriber.closed) return;
          if (index !== emitted) {
            early.set(index, result);
            return;
          }
          // Counted before it is emitted: a subscriber that feeds the source again gets the next index.
          emitted++;
          subscriber.next(result);
          for (let next = early.get(emitted); next !== undefined; next = early.get(emitted)) {
            early.delete(emitted++);
            subscriber.next(next);
          }
          completeIfDone();
        },
        error: (error) => subscriber.error(error),
      };
      return source.subscribe({
        next: (event) => engine.submit(stream, event, sink, dispatched++),
        error: (error: unknown) => subscriber.error(error),
        complete: () => {
          sourceDone = true;
          completeIfDone();
        },
      });
    });
}
