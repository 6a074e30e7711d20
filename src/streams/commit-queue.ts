import type { Rune } from '../reducers/rune.js';
import { appendChannel, sampler, type StoreAppendReport } from './diagnostics.js';
import { StoreConflictError, StoreError, StoreFencedError, type AppendOptions, type Fence, type RuneStore } from './store.js';
import type { DispatchSink } from './submit.js';

/** What the queue reads and writes of an instance (the engine's instances are this). */
export interface Committable {
  readonly stream: string;
  /** The seq of its last durable rune; 0 while its spawn is not durable. Set by the queue only. */
  durableSeq: number;
  /** The state after that rune: what subscribers see. Set by the queue only. */
  durableState: unknown;
}

/** What the queue tells the rest of the engine. */
export interface CommitHooks<I extends Committable> {
  /**
   * A rune is durable and `instance.durableSeq` / `durableState` are its: tell subscribers. Called
   * in seq order per stream, never before the store took the rune. A dispatch made from in here
   * (a subscriber answering a rune) is taken in the next batch, never committed in the middle.
   */
  published(instance: I, rune: Rune): void;
  /** The store refused `stream`'s runes: memory must drop its instance, so the next use hydrates what the store holds. */
  refused(stream: string): void;
  /**
   * Another writer took the seq of `stream`'s next rune (a {@link StoreConflictError} naming it):
   * `runes` are its runes of the refused append and those queued behind them, in seq order. None
   * is durable and no sink was told: the engine brings the stream up to the store's head and
   * applies their events again.
   */
  lost(stream: string, runes: readonly PendingRune<I>[]): void;
  /**
   * Called after each commit, for the work that follows one (saving the snapshots that fell due):
   * its promise, if any, is waited for before the next batch is appended. On the hot path: return
   * `undefined` when there is nothing to wait for.
   */
  committed(): Promise<void> | undefined;
}

/** Options of {@link CommitQueue}. */
export interface CommitQueueOptions {
  /**
   * How many runes a store with `appendSync` commits at once in one turn of the event loop; the
   * rest of the turn's runes wait for the next turn in a batch. Default {@link MAX_BURST}.
   */
  readonly maxBurst?: number;
  /** The writer id every append names (see {@link AppendOptions.writer}). Default: none. */
  readonly writer?: string;
  /**
   * The lease the runes of a stream are written under: one for all, or a function of the stream
   * (a lease manager's, one lease per share of the streams). A batch carries the fences of its
   * streams, each once. Default: none.
   */
  readonly fence?: Fence | FenceOf;
}

/** The lease a stream's runes are written under, if any: a lease manager's `fenceOf`. */
export type FenceOf = (stream: string) => Fence | undefined;

/**
 * How many dispatches a store with `appendSync` commits at once in one turn of the event loop by
 * default; the rest of the turn's dispatches wait for the next turn, as with any store.
 */
export const MAX_BURST = 10_000;

/** A rune waiting for its batch, with the sink and token its outcome is told with. */
export interface PendingRune<I> {
  readonly instance: I;
  readonly rune: Rune;
  readonly state: unknown;
  /** Told the outcome, with `token`: one sink serves many dispatches, so none needs a closure. */
  readonly sink: DispatchSink<any>;
  readonly token: unknown;
}

/** Calls `fn` on the next turn of the event loop: Node's `setImmediate`, a timer where there is none. */
const onNextTurn: (fn: () => void) => void = typeof setImmediate === 'function' ? (fn) => setImmediate(fn) : (fn) => setTimeout(fn, 0);

const nextTurn = (): Promise<void> => new Promise((resolve) => onNextTurn(resolve));

/**
 * The engine's write path: commits accepted runes to the store, then makes them visible.
 *
 * 1. A store with `appendSync` (nothing to wait for) takes a rune at once, and it is published
 *    before {@link enqueue} returns. Otherwise the rune joins the next batch: with a store that
 *    does I/O; behind a rune of its stream still waiting in a batch (so a stream's runes reach the
 *    store in seq order); when enqueued from inside a subscriber, while a rune is being published
 *    (an epic that answers its own runes goes round once a turn, not in a loop that never
 *    yields); and after `maxBurst` at-once commits in one turn (a caller that dispatches again
 *    whenever a dispatch resolves must not starve timers and I/O).
 * 2. A batch gathers the runes of one turn of the event loop and is appended in one `append`; one
 *    append is in flight at a time, so each stream's runes reach the store in order.
 * 3. Publish after commit: an instance's durable seq and state move, and `hooks.published` is
 *    called, only once the store took the rune; then its sink is told it was accepted.
 * 4. A batch the store refused for a reason that may be one rune's own is split until that rune
 *    is found: it fails alone, and the batch's other runes are acknowledged (one caller's bad rune
 *    never fails another caller's dispatch). Otherwise it fails as `#fail` says: nothing of it is durable.
 */
export class CommitQueue<I extends Committable> {
  readonly #store: RuneStore;
  readonly #appendSync: ((rune: Rune, options?: AppendOptions) => void) | undefined;
  readonly #writer: string | undefined;
  /** With one fence for all (or none), what every append says: decided once. */
  readonly #appendOptions: AppendOptions | undefined;
  readonly #fenceOf: FenceOf | undefined;
  /**
   * Per lease, the options of an `appendSync` under its newest epoch a `fenceOf` gave: no object
   * kept per rune (a lease manager makes a new fence object per call), one per lease.
   */
  readonly #optionsByLease = new Map<string, AppendOptions & { readonly fences: readonly [Fence] }>();
  readonly #sampled = sampler();
  readonly #hooks: CommitHooks<I>;
  readonly #maxBurst: number;
  #pending: PendingRune<I>[] = [];
  #flushing: Promise<void> | undefined;
  /** Runes committed at once in this turn of the event loop. */
  #burst = 0;
  /** Whether subscribers are being called: a rune enqueued from inside one waits for the next batch. */
  #publishing = false;
  readonly #endBurst = (): void => {
    this.#burst = 0;
  };

  constructor(store: RuneStore, hooks: CommitHooks<I>, options: CommitQueueOptions = {}) {
    this.#store = store;
    this.#appendSync = store.appendSync?.bind(store);
    this.#hooks = hooks;
    this.#maxBurst = options.maxBurst ?? MAX_BURST;
    const { writer, fence } = options;
    this.#writer = writer;
    this.#fenceOf = typeof fence === 'function' ? fence : undefined;
    this.#appendOptions =
      writer === undefined && (fence === undefined || this.#fenceOf !== undefined) ? undefined : { writer, ...(typeof fence === 'object' ? { fences: [fence] } : {}) };
  }

  /** What the append of one rune of `stream` says. */
  #optionsFor(stream: string): AppendOptions | undefined {
    const fence = this.#fenceOf?.(stream);
    if (fence === undefined) return this.#appendOptions;
    const cached = this.#optionsByLease.get(fence.lease);
    if (cached !== undefined && cached.fences[0].epoch === fence.epoch) return cached;
    const options = { writer: this.#writer, fences: [{ lease: fence.lease, epoch: fence.epoch }] as [Fence] };
    this.#optionsByLease.set(fence.lease, options);
    return options;
  }

  /** What the append of `batch` says, and the fence each of its streams is written under (with a `fenceOf`). */
  #batchOptions(batch: readonly PendingRune<I>[]): { options: AppendOptions | undefined; fenceOf: Map<string, Fence | undefined> | undefined } {
    const fenceOf = this.#fenceOf;
    if (fenceOf === undefined) return { options: this.#appendOptions, fenceOf: undefined };
    const fences = new Map<string, Fence | undefined>();
    const byLease = new Map<string, Fence>();
    for (const { rune } of batch) {
      if (fences.has(rune.stream)) continue;
      const fence = fenceOf(rune.stream);
      fences.set(rune.stream, fence);
      if (fence !== undefined) byLease.set(`${fence.epoch} ${fence.lease}`, fence);
    }
    const options = byLease.size === 0 ? this.#appendOptions : { writer: this.#writer, fences: [...byLease.values()] };
    return { options, fenceOf: fences };
  }

  /** The batches being appended, if any: resolves once none is pending. */
  get flushing(): Promise<void> | undefined {
    return this.#flushing;
  }

  /**
   * Commits an accepted rune of `instance`, `state` being the instance's state after it, and tells
   * `sink` the outcome with `token`: `{accepted: true, rune}` once durable, or the store's error.
   */
  enqueue<T>(instance: I, rune: Rune, state: unknown, sink: DispatchSink<T>, token: T): void {
    const appendSync = this.#appendSync;
    if (appendSync === undefined || this.#publishing || instance.durableSeq !== rune.seq - 1 || this.#burst >= this.#maxBurst) {
      this.#pending.push({ instance, rune, state, sink, token });
      if (this.#flushing === undefined) this.#flushing = this.#flushSoon();
      return;
    }
    if (this.#burst++ === 0) onNextTurn(this.#endBurst);
    const startedAt = appendChannel.hasSubscribers && this.#sampled() ? performance.now() : undefined;
    try {
      appendSync(rune, this.#fenceOf === undefined ? this.#appendOptions : this.#optionsFor(rune.stream));
    } catch (error) {
      if (error instanceof StoreConflictError && error.stream === rune.stream) return this.#hooks.lost(rune.stream, [{ instance, rune, state, sink, token }]);
      this.#hooks.refused(instance.stream);
      sink.error(error, token);
      return;
    }
    if (startedAt !== undefined) appendChannel.publish({ runes: 1, ms: performance.now() - startedAt } satisfies StoreAppendReport);
    this.publish(instance, rune, state);
    void this.#hooks.committed();
    sink.result({ accepted: true, rune }, token);
  }

  /**
   * Makes one durable rune visible: the instance's durable seq and state, then `hooks.published`.
   * Runes enqueued meanwhile wait for the next batch.
   */
  publish(instance: I, rune: Rune, state: unknown): void {
    const outer = this.#publishing;
    this.#publishing = true;
    try {
      instance.durableState = state;
      instance.durableSeq = rune.seq;
      this.#hooks.published(instance, rune);
    } finally {
      this.#publishing = outer;
    }
  }

  /**
   * Runs `announce` as if publishing: runes enqueued from inside it wait for the next batch. For
   * making visible runes that did not come through this queue (another writer's).
   */
  whilePublishing(announce: () => void): void {
    const outer = this.#publishing;
    this.#publishing = true;
    try {
      announce();
    } finally {
      this.#publishing = outer;
    }
  }

  /** Appends batches until none is pending: one append in flight at a time keeps each stream in order. */
  async #flushSoon(): Promise<void> {
    try {
      do {
        // Each batch waits a turn of the event loop, gathering the runes of that turn. A turn, not
        // a microtask: a caller that dispatches again whenever a dispatch resolves must not
        // starve timers and I/O.
        await nextTurn();
        const batch = this.#pending;
        this.#pending = [];
        await this.#commit(batch);
      } while (this.#pending.length > 0);
    } finally {
      this.#flushing = undefined;
    }
  }

  /**
   * Appends one batch, then publishes it and tells its sinks. A batch the store refused for a
   * reason that may be one rune's own (see {@link isolates}) is split: its second half goes back
   * to the head of the queue, and its first half is committed (and split again) on its own. So a
   * rune the store cannot take fails alone (with the runes of its stream queued behind it), after
   * about 2 log2(n) appends, and every other rune of the batch is acknowledged.
   */
  async #commit(batch: PendingRune<I>[]): Promise<void> {
    const startedAt = appendChannel.hasSubscribers ? performance.now() : undefined;
    const { options, fenceOf } = this.#batchOptions(batch);
    try {
      await this.#store.append(
        batch.map((p) => p.rune),
        options,
      );
    } catch (error) {
      if (batch.length === 1 || !isolates(error)) return this.#fail(batch, error, fenceOf);
      const half = Math.ceil(batch.length / 2);
      const rest = new Set(batch.slice(half));
      // At the head of the queue: a stream that fails in the first half takes its runes of the rest with it.
      this.#pending = [...rest, ...this.#pending];
      await this.#commit(batch.slice(0, half));
      // What is left of the rest, still at the head unless a conflict put runes back before it: on its own too.
      let left = 0;
      while (left < this.#pending.length && rest.has(this.#pending[left]!)) left++;
      if (left > 0) await this.#commit(this.#pending.splice(0, left));
      return;
    }
    if (startedAt !== undefined) appendChannel.publish({ runes: batch.length, ms: performance.now() - startedAt } satisfies StoreAppendReport);
    for (const p of batch) this.publish(p.instance, p.rune, p.state);
    for (const p of batch) p.sink.result({ accepted: true, rune: p.rune }, p.token);
    await this.#hooks.committed();
  }

  /**
   * A batch the store refused: nothing of it is durable. A conflict on one of its streams (another
   * writer got there first) takes only that stream's runes and the queued ones built on them: they
   * are `lost`, for the engine to apply again on the stream's newer state. A fence refused (the
   * writer lost a lease) fails the runes of the streams written under that lease (all of them with
   * one fence for all) and the queued ones of those streams. Either way the rest of the batch,
   * refused only for the company it kept, goes back to the head of the queue and is appended
   * again. Any other error reaches here for a batch of one rune (see {@link CommitQueue.#commit}),
   * or for a store that cannot be reached (`unavailable`) or is closed: every rune of the batch
   * fails with it, and so do the queued ones of its streams. The failed streams are `refused`:
   * their instances leave memory.
   */
  #fail(batch: readonly PendingRune<I>[], error: unknown, fenceOf: Map<string, Fence | undefined> | undefined): void {
    const inBatch = (stream: string): boolean => batch.some((p) => p.rune.stream === stream);
    const conflict = error instanceof StoreConflictError && inBatch(error.stream) ? error.stream : undefined;
    const fenced =
      error instanceof StoreFencedError && fenceOf !== undefined
        ? [...fenceOf].flatMap(([stream, fence]) => (fence?.lease === error.fence.lease && fence.epoch === error.fence.epoch ? [stream] : []))
        : [];
    const taken = new Set(conflict !== undefined ? [conflict] : fenced.length > 0 ? fenced : batch.map((p) => p.rune.stream));
    const keepsInnocent = conflict !== undefined || fenced.length > 0;
    const queue = keepsInnocent ? [...batch, ...this.#pending] : this.#pending;
    const failed: PendingRune<I>[] = keepsInnocent ? [] : [...batch];
    this.#pending = [];
    for (const p of queue) (taken.has(p.rune.stream) ? failed : this.#pending).push(p);
    if (conflict !== undefined) return this.#hooks.lost(conflict, failed);
    for (const stream of taken) this.#hooks.refused(stream);
    for (const p of failed) p.sink.error(error, p.token);
  }
}

/**
 * Whether a batch refused with `error` is split to find the rune at fault (a value the database
 * cannot hold, a rune some store rejects, a batch over its size): every error but those that
 * speak for the whole batch. A conflict and a fence have their own handling in `#fail`; a store
 * that is closed, or that cannot be reached (`unavailable`: the write may have been committed
 * just before the connection dropped, so it must not be written again), fails every rune alike,
 * whatever company it keeps.
 */
function isolates(error: unknown): boolean {
  if (error instanceof StoreConflictError || error instanceof StoreFencedError) return false;
  return !(error instanceof StoreError && (error.code === 'unavailable' || error.code === 'closed'));
}
