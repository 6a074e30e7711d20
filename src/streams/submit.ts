import type { DispatchResult } from './engine.js';

/**
 * Where the engine delivers the outcome of one submitted event, with the caller's `token` handed
 * back: one sink serves every event of a caller, so no closure or promise is made per event.
 * Exactly one of the two is called per submission, in the order the engine settles them.
 */
export interface DispatchSink<T> {
  /** The event was accepted (its rune is durable) or rejected (nothing appended). */
  result(result: DispatchResult, token: T): void;
  /** The store refused the commit, or the stream could not be loaded: nothing of it is durable. */
  error(error: unknown, token: T): void;
}

/**
 * One `dispatch` call turned into a promise only when it must wait: an outcome delivered during
 * `submit` becomes `Promise.resolve` (what `dispatch` returned before there was a sink).
 */
export class PromisedDispatch {
  private result: DispatchResult | undefined;
  private failed = false;
  private error: unknown;
  private resolve: ((result: DispatchResult) => void) | undefined;
  private reject: ((error: unknown) => void) | undefined;

  settle(result: DispatchResult): void {
    if (this.resolve !== undefined) this.resolve(result);
    else this.result = result;
  }

  fail(error: unknown): void {
    if (this.reject !== undefined) this.reject(error);
    else {
      this.failed = true;
      this.error = error;
    }
  }

  /** Called right after `submit`: the outcome if it came, else a promise of it. */
  promise(): Promise<DispatchResult> {
    if (this.result !== undefined) return Promise.resolve(this.result);
    if (this.failed) return Promise.reject(this.error);
    return new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }
}

/** The sink of every `dispatch` and `spawn`: the token is that call's {@link PromisedDispatch}. */
export const promiseSink: DispatchSink<PromisedDispatch> = {
  result: (result, call) => call.settle(result),
  error: (error, call) => call.fail(error),
};

/** A dispatch that lost a seq race to another writer, on its way to another try: its caller's sink and token, and its losses in a row. */
export interface RaceRetry {
  readonly sink: DispatchSink<any>;
  readonly token: unknown;
  readonly losses: number;
}

/** The sink of a dispatch tried again after a lost seq race: hands the outcome to the caller's own sink. */
export const retrySink: DispatchSink<RaceRetry> = {
  result: (result, retry) => retry.sink.result(result, retry.token),
  error: (error, retry) => retry.sink.error(error, retry.token),
};

/** The next try of a dispatch that lost a seq race as `sink` / `token`: its losses counted, its caller's sink kept. */
export const raceRetry = (sink: DispatchSink<any>, token: unknown): RaceRetry =>
  sink === retrySink ? { ...(token as RaceRetry), losses: (token as RaceRetry).losses + 1 } : { sink, token, losses: 1 };
