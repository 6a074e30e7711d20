import { channel } from 'node:diagnostics_channel';
import type { DispatchSink } from './submit.js';

/**
 * `node:diagnostics_channel` channels the engine and its store publish on, for metrics and
 * monitoring. Nothing is measured or built for a channel nobody subscribes to: the hot path pays
 * one `hasSubscribers` check.
 */
export const ENGINE_CHANNELS = {
  /** One accepted dispatch in {@link DISPATCH_SAMPLE_EVERY}, once durable: a {@link DispatchReport}. */
  dispatch: 'runestream:engine:dispatch',
  /** Every spawn or dispatch the engine refused: a {@link RejectionReport}. */
  rejection: 'runestream:engine:rejection',
  /**
   * Every rune the engine publishes (its own, once durable, and, with `followStore`, other
   * writers'): the `Rune` itself. Cheaper than a `runes$()` subscriber on the hot path.
   */
  rune: 'runestream:engine:rune',
  /** Every stream hydrated from the store: a {@link HydrationReport}. */
  hydration: 'runestream:engine:hydration',
  /**
   * Appends to the store: every batch of a store that does I/O; one in {@link DISPATCH_SAMPLE_EVERY}
   * of the single-rune appends of a store that takes each at once (the memory store). A {@link StoreAppendReport}.
   */
  append: 'runestream:store:append',
  /**
   * A store's database became unreachable (its first operation failed for a lost or refused
   * connection), or reachable again (its first operation that succeeded after): once per outage,
   * never per failed call. A {@link StoreAvailabilityReport}.
   */
  availability: 'runestream:store:availability',
} as const;

/**
 * Timing a dispatch costs two clock reads, more than the rest of an in-memory dispatch's
 * bookkeeping, so one accepted dispatch in this many is timed while someone listens (and one
 * single-rune append in as many): a sample, as tracing samples.
 */
export const DISPATCH_SAMPLE_EVERY = 64;

/**
 * One sampled accepted dispatch: the machine and kind of its rune, and `ms` from the dispatch to
 * its rune being durable, on the wall clock (`performance.now()`).
 */
export interface DispatchReport {
  readonly machine: string;
  readonly kind: string;
  readonly ms: number;
}

/** A spawn or dispatch refused: the engine's code (see `EngineRejectionCode`). */
export interface RejectionReport {
  readonly code: string;
}

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
export const rejectionChannel = channel(ENGINE_CHANNELS.rejection);
export const runeChannel = channel(ENGINE_CHANNELS.rune);
export const hydrationChannel = channel(ENGINE_CHANNELS.hydration);
export const appendChannel = channel(ENGINE_CHANNELS.append);
export const availabilityChannel = channel(ENGINE_CHANNELS.availability);

/** A store's database went away (`available: false`, with the error that said so) or came back. */
export interface StoreAvailabilityReport {
  readonly available: boolean;
  /** Which store: its kind and where (a PostgreSQL store: its schema). */
  readonly store: string;
  /** Why it is unavailable: the failed operation's message. */
  readonly error?: string;
}

/**
 * Tracks a store's availability from the outcome of its operations and publishes each change on
 * {@link ENGINE_CHANNELS.availability}: the first failure of an outage, then the first success
 * after it. Calls that fail while it is down publish nothing more.
 */
export function availabilityTracker(store: string): { failed(error: string): void; succeeded(): void } {
  let available = true;
  return {
    failed(error) {
      if (!available) return;
      available = false;
      availabilityChannel.publish({ available, store, error } satisfies StoreAvailabilityReport);
    },
    succeeded() {
      if (available) return;
      available = true;
      availabilityChannel.publish({ available, store } satisfies StoreAvailabilityReport);
    },
  };
}

/** What {@link reportingSink} carries per dispatch: the caller's sink and token, and when it started. */
export interface TimedDispatch<T> {
  readonly sink: DispatchSink<T>;
  readonly token: T;
  readonly startedAt: number;
}

/**
 * The sink a sampled dispatch goes through: it reports an accepted dispatch's latency, then hands
 * the outcome to the caller's own sink.
 */
export const reportingSink: DispatchSink<TimedDispatch<any>> = {
  result: (result, timed) => {
    if (result.accepted) dispatchChannel.publish({ machine: result.rune.machine, kind: result.rune.kind, ms: performance.now() - timed.startedAt } satisfies DispatchReport);
    timed.sink.result(result, timed.token);
  },
  error: (error, timed) => timed.sink.error(error, timed.token),
};

/** A sampler: true once in {@link DISPATCH_SAMPLE_EVERY} calls (each sampler counts its own). */
export function sampler(): () => boolean {
  let calls = 0;
  return () => (++calls & (DISPATCH_SAMPLE_EVERY - 1)) === 0;
}
