import { channel } from 'node:diagnostics_channel';
import type { DispatchResult } from './engine.js';
import type { DispatchSink } from './submit.js';

/**
 * `node:diagnostics_channel` channels the engine and its store publish on, for metrics and
 * monitoring. Nothing is measured or built for a channel nobody subscribes to: the hot path pays
 * one `hasSubscribers` check.
 */
export const ENGINE_CHANNELS = {
  /** Every dispatch, once settled: a {@link DispatchReport}. */
  dispatch: 'runestream:engine:dispatch',
  /** Every stream hydrated from the store: a {@link HydrationReport}. */
  hydration: 'runestream:engine:hydration',
  /** Every append to the store (a batch, or one rune at once): a {@link StoreAppendReport}. */
  append: 'runestream:store:append',
} as const;

/**
 * One dispatch, settled: `accepted` with the machine and kind of its rune, `rejected` with the
 * engine's code, or `failed` (the store refused the commit). `ms` runs from the dispatch to its
 * outcome (the rune durable), on the wall clock (`performance.now()`).
 */
export type DispatchReport =
  | { readonly outcome: 'accepted'; readonly machine: string; readonly kind: string; readonly ms: number }
  | { readonly outcome: 'rejected'; readonly code: string; readonly ms: number }
  | { readonly outcome: 'failed'; readonly ms: number };

/** A stream read back into memory: its machine and how long the read and fold took. */
export interface HydrationReport {
  readonly machine: string;
  readonly ms: number;
}

/** One append to the store: how many runes, and how long it took. */
export interface StoreAppendReport {
  readonly runes: number;
  readonly ms: number;
}

export const dispatchChannel = channel(ENGINE_CHANNELS.dispatch);
export const hydrationChannel = channel(ENGINE_CHANNELS.hydration);
export const appendChannel = channel(ENGINE_CHANNELS.append);

/** What {@link reportingSink} carries per dispatch: the caller's sink and token, and when it started. */
export interface TimedDispatch<T> {
  readonly sink: DispatchSink<T>;
  readonly token: T;
  readonly startedAt: number;
}

const settled = (result: DispatchResult, ms: number): DispatchReport =>
  result.accepted ? { outcome: 'accepted', machine: result.rune.machine, kind: result.rune.kind, ms } : { outcome: 'rejected', code: result.code, ms };

/**
 * The sink a dispatch goes through while someone listens on the dispatch channel: it reports the
 * outcome, then hands it to the caller's own sink.
 */
export const reportingSink: DispatchSink<TimedDispatch<any>> = {
  result: (result, timed) => {
    dispatchChannel.publish(settled(result, performance.now() - timed.startedAt));
    timed.sink.result(result, timed.token);
  },
  error: (error, timed) => {
    dispatchChannel.publish({ outcome: 'failed', ms: performance.now() - timed.startedAt } satisfies DispatchReport);
    timed.sink.error(error, timed.token);
  },
};
