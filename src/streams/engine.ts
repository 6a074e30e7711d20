import { Subject, defer, filter, from, type Observable, type Subscription } from 'rxjs';
import type { AnyMachine } from '../reducers/machine.js';
import type { Rune } from '../reducers/rune.js';
import { CALLER_ORIGIN, type RuneOrigin } from '../reducers/rune-origin.js';
import { storableValue, valueCheck } from '../reducers/value-limits.js';
import { CommitQueue } from './commit-queue.js';
import { dispatchChannel, reportingSink, sampler } from './diagnostics.js';
import { isSpawnCommand, runEpics, type EpicCommand, type EpicReport } from './epic.js';
import type { ArchiveError } from './archive/cold-store.js';
import { archivedReads } from './archived-reads.js';
import { Seals } from './seals.js';
import { Snapshots } from './snapshots.js';
import { StoreError, type Snapshot } from './store.js';
import { PromisedDispatch, promiseSink, type DispatchSink } from './submit.js';
import { engineOptions, type EngineOptions } from './engine/options.js';
import { Outlets } from './engine/outlets.js';
import { engineReads, type RunesOptions } from './engine/reads.js';
import { Homes } from './engine/homes.js';
import type { Instance } from './engine/instance.js';
import { spawnStream } from './engine/spawn.js';
import { checkedOrigin } from './engine/origins.js';
import { notAStreamId, rejected, refusedValue, type DispatchResult } from './engine/rejections.js';

export type { EngineOptions } from './engine/options.js';
export type { RunesOptions } from './engine/reads.js';
export type { DispatchResult, EngineRejectionCode } from './engine/rejections.js';

/** Something went wrong outside any caller's request; the engine carries on. */
export type EngineError =
  | { type: 'snapshot_failed'; stream: string; error: unknown }
  /** A read of a stream's archived runes found its archive damaged (`error.code` says how, its message names the segment). */
  | { type: 'archive_damaged'; stream: string; error: ArchiveError }
  /** A read of a stream's stored runes found one that does not match its hash chain (`chain_broken`, naming the seq): the stream is refused. */
  | { type: 'stream_corrupt'; stream: string; error: StoreError }
  | EpicReport;

/** An engine hosting many machine instances, each under a stream id. */
export interface Engine {
  /** Creates `stream` as an instance of `machine` (an id or a machine): its first rune. */
  spawn(stream: string, machine: string | AnyMachine, input?: unknown, options?: DispatchOptions): Promise<DispatchResult>;
  /** Validates, applies and durably appends one event; resolves once its rune is durable. */
  dispatch(stream: string, event: unknown, options?: DispatchOptions): Promise<DispatchResult>;
  /**
   * `dispatch` without a promise: the outcome goes to `sink` with `token` (the caller's own value,
   * handed back), at once with the memory store, when its batch commits with a store that does
   * I/O. One sink serves every event of a caller, so nothing is made per event: what `dispatchTo`
   * calls, and what a hot loop or another operator can call.
   *
   * ```ts
   * const sink: DispatchSink<number> = {
   *   result: (result, i) => console.log(i, result.accepted),
   *   error: (error, i) => console.error(i, error),
   * };
   * engine.submit('chat-1', { type: 'Ping' }, sink, 1);
   * ```
   *
   * `origin` is what its rune records the event came from (see {@link DispatchOptions}).
   */
  submit<T>(stream: string, event: unknown, sink: DispatchSink<T>, token: T, origin?: RuneOrigin): void;
  /** The stream's current durable state, then every change. Errors for an unknown stream. */
  state$<S = unknown>(stream: string): Observable<S>;
  /**
   * The stream's current durable state and the seq of the rune it follows, hydrating the stream
   * if it is not in memory; `undefined` for an unknown stream. With `runes$(stream, {afterSeq: seq})`
   * it is how a server sends a snapshot and then every change, without gap or duplicate.
   */
  snapshot<S = unknown>(stream: string): Promise<Snapshot<S> | undefined>;
  /**
   * The id of the machine of a stream in memory (as `snapshot` or `state$` leaves it), else
   * `undefined`: how a server finds the machine whose `derive` it applies to a snapshot.
   */
  machineOf(stream: string): string | undefined;
  /**
   * The stream's stored runes after `afterSeq`, then its live ones: no gap, no duplicate. Completes
   * when the engine closes (subscribed after, at once), with no error.
   */
  runes$(stream: string, options?: RunesOptions): Observable<Rune>;
  /** Every live rune of every stream, from now on; completes when the engine closes. */
  runes$(): Observable<Rune>;
  /** Releases a stream's instance from memory (once its runes are durable); the next use hydrates it. */
  release(stream: string): void;
  /** Failures no caller is waiting for (a snapshot that could not be saved, ...). */
  readonly errors$: Observable<EngineError>;
  /** How many instances are in memory. */
  readonly size: number;
  /** The machines this engine hosts, by id (its `machines` option). */
  readonly machines: Readonly<Record<string, AnyMachine>>;
  /** Waits for pending appends, then closes the store. Later calls are refused with `closed`. */
  close(): Promise<void>;
}

/** Options of one `dispatch` or `spawn`. */
export interface DispatchOptions {
  /**
   * What the event came from, recorded on its rune (see {@link RuneOrigin}): a server passes its
   * client's identity (`clientOrigin(identity.id)`). Default: the engine's caller, `{ by: 'client' }`.
   * An origin that is not a `RuneOrigin` is refused as `invalid_origin`; give a frozen one (as
   * `clientOrigin` makes) to have it checked once rather than per event.
   */
  readonly origin?: RuneOrigin;
}

/** An epic's dispatch on its way: `event` until it was submitted again with its strings made storable. */
interface EffectDispatch {
  readonly stream: string;
  event: unknown;
  readonly origin: RuneOrigin;
  /** The epic runner's sink of its outcome, and its token. */
  readonly sink: DispatchSink<any>;
  readonly token: unknown;
}

/** A writer id for this engine's appends, so that it tells its own runes from others' in the store's tail. */
const newWriterId = (): string => `engine-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;

/**
 * Creates an engine: keyed machine instances folded by their pure transitions, every accepted
 * event appended as a rune to a durable store, state and runes multicast to subscribers.
 *
 * 1. `dispatch` checks the event against `limits` (as `spawn` does its input), validates it with
 *    the machine's zod schema, applies the transition, and commits the rune (with the payload
 *    its machine's step computed for its kind, if any); it resolves only
 *    once the rune is durable. A store that does I/O gets the dispatches of one turn in one
 *    batch; the memory store (`appendSync`) takes each at once. A rejection appends nothing and
 *    says why.
 * 2. Subscribers see only durable states and runes: `state$` and `runes$` publish after the commit.
 * 3. An instance not in memory is hydrated from the store on its next dispatch or subscription:
 *    from its newest snapshot, then folding the runes after it. An instance that reaches a
 *    terminal state leaves memory once that rune is durable.
 * 4. Every stream's loading, waiting events and several writers are its home's business (see
 *    {@link Homes}): with `followStore`, other writers' runes reach the engine from the store's
 *    `tail`; a dispatch that loses a seq race to another writer is applied again once the stream
 *    is brought up to the store's head, its missed runes published in seq order (up to
 *    `maxRaceLosses` times in a row, then rejected with `contention`).
 * 5. Epics (see {@link runEpics}) hear every live rune, never a replayed one, and what they emit is
 *    dispatched, its strings made storable rather than refused as `invalid_string` (a NUL or a lone
 *    surrogate from a model or a tool becomes U+FFFD, see `storableValue`). A rejected command or a
 *    failing epic is reported on `errors$`; a failed epic is resubscribed with backoff. They start
 *    on the next microtask.
 *
 * ## Example
 * ```ts
 * import { createEngine } from 'runestream';
 * const engine = createEngine();
 * await engine.spawn('chat-1', 'chat-actor');
 * engine.state$('chat-1').subscribe((s) => console.log(s));
 * await engine.dispatch('chat-1', { type: 'Pause', reason: 'lunch' });
 * // Logs:
 * // { value: 'idle' }
 * // { value: 'paused', reason: 'lunch' }
 * await engine.close();
 * ```
 */
export function createEngine(options: EngineOptions = {}): Engine {
  const { store, scheduler, machines, snapshotEvery, retention, epics, deps, ownership, limits, fence, maxRaceLosses, followStore, archive } = engineOptions(options);
  const writer = followStore ? newWriterId() : undefined;
  /** The limits and the storable strings, in one walk (it runs even with every limit off). */
  const checkValue = valueCheck(limits);

  const errors = new Subject<EngineError>();
  /** Reports a read that found a stream's stored runes damaged: the stream is refused, the log says so. */
  const readFailed = (stream: string, error: unknown): void => {
    if (error instanceof StoreError && (error.code === 'chain_broken' || error.code === 'corrupt_file')) errors.next({ type: 'stream_corrupt', stream, error });
  };
  const storeRead = (stream: string, afterSeq: number, limit: number) =>
    store.read(stream, afterSeq, limit).catch((error: unknown) => {
      readFailed(stream, error);
      throw error;
    });
  const readRunes =
    archive === undefined
      ? storeRead
      : archivedReads({ read: storeRead, head: (stream) => store.head(stream) }, archive, (stream, error) => errors.next({ type: 'archive_damaged', stream, error }));
  const sampled = sampler();
  const outlets = new Outlets();
  let closed = false;

  const seals = new Seals(store, machines);
  const snapshots = new Snapshots(store, {
    every: snapshotEvery,
    retention,
    failed: (stream, error) => errors.next({ type: 'snapshot_failed', stream, error }), // the runes are durable: hydration folds them
  });

  // --- the write path: commit, then publish ------------------------------------------------------

  const commits = new CommitQueue<Instance>(
    store,
    {
      /** One durable rune: a snapshot if due, subscribers, release. */
      published: (instance, rune) => {
        const current = homes.isCurrent(instance);
        snapshots.counted(instance, current);
        // The hot path: no wrapper object per state.
        outlets.state(rune.stream, instance);
        outlets.rune(rune);
        if (instance.machine.seals !== undefined || instance.machine.holds !== undefined) seals.reached(rune.stream, rune.machine, rune.to);
        homes.published(instance, rune, current);
      },
      refused: (stream) => homes.refused(stream),
      lost: (stream, runes) => homes.lost(stream, runes),
      committed: () => (snapshots.due ? snapshots.saveSoon() : snapshots.saving),
    },
    { ...(writer === undefined ? {} : { writer }), ...(fence === undefined ? {} : { fence }) },
  );
  const homes = new Homes({ store, machines, seals, commits, outlets, maxRaceLosses, readFailed });
  // Other writers' runes, from the store's tail (the engine's own are its commit queue's business).
  const stopFollowing = writer === undefined ? undefined : store.tail!((rune, _position, from) => from !== writer && homes.heard(rune));

  // --- spawn and dispatch ---------------------------------------------------------------------------

  const spawn = (stream: string, machine: string | AnyMachine, input?: unknown, options?: DispatchOptions): Promise<DispatchResult> => {
    if (closed) return Promise.resolve(rejected('closed', 'the engine is closed'));
    const origin = checkedOrigin(options?.origin ?? CALLER_ORIGIN);
    if (typeof origin === 'string') return Promise.resolve(rejected('invalid_origin', origin));
    return spawnStream({ homes, commits, seals, scheduler, machines, checkValue }, stream, machine, input, origin);
  };

  /**
   * The promise-free dispatch: checks the event against the limits, then validates, applies and
   * commits it, and tells `sink` the outcome with `token` (at once with the memory store, when the
   * batch commits with a store that does I/O). `dispatch` and `dispatchTo` both go through here.
   */
  const submit = <T>(stream: string, event: unknown, sink: DispatchSink<T>, token: T, origin: RuneOrigin = CALLER_ORIGIN): void => {
    // Timed only while someone listens (metrics), and then one dispatch in a sample.
    if (dispatchChannel.hasSubscribers && sink !== reportingSink && sampled())
      return submit(stream, event, reportingSink, { sink, token, startedAt: performance.now() }, origin);
    if (closed) return sink.result(rejected('closed', 'the engine is closed'), token);
    const recorded = origin === CALLER_ORIGIN ? origin : checkedOrigin(origin);
    if (typeof recorded === 'string') return sink.result(rejected('invalid_origin', recorded), token);
    const notAnId = notAStreamId(stream);
    if (notAnId !== undefined) return sink.result(notAnId, token);
    const violation = checkValue(event, 'event');
    if (violation !== undefined) return sink.result(refusedValue(violation, 'invalid_event'), token);
    // A rune's `at` is when its event was dispatched, even if the stream had to be hydrated first:
    // a timer that fires at its deadline stamps its rune with the deadline.
    homes.enter(stream, event, scheduler.now(), recorded, sink, token);
  };

  const dispatch = (stream: string, event: unknown, options?: DispatchOptions): Promise<DispatchResult> => {
    const call = new PromisedDispatch();
    submit(stream, event, promiseSink, call, options?.origin);
    return call.promise();
  };

  /**
   * The sink of an epic's dispatch: an event refused as `invalid_string` (text a model or a tool
   * produced with a NUL or a lone surrogate) is submitted once more with its strings made storable
   * (see `storableValue`). The refusal comes during `submit`, before the event is applied, so the
   * storable one keeps its place among the epic's commands.
   */
  const effectSink: DispatchSink<EffectDispatch> = {
    result: (result, effect) => {
      if (result.accepted || result.code !== 'invalid_string' || effect.event === undefined) return effect.sink.result(result, effect.token);
      const event = storableValue(effect.event, limits.maxDepth);
      effect.event = undefined;
      submit(effect.stream, event, effectSink, effect, effect.origin);
    },
    error: (error, effect) => effect.sink.error(error, effect.token),
  };

  /** What an epic emits, dispatched or spawned: its strings made storable rather than refused (see `effectSink`). */
  const dispatchEffect = <T>(command: EpicCommand, sink: DispatchSink<T>, token: T, origin: RuneOrigin): void => {
    if (isSpawnCommand(command)) {
      spawn(command.stream, command.spawn, storableValue(command.input, limits.maxDepth), { origin }).then(
        (result) => sink.result(result, token),
        (error: unknown) => sink.error(error, token),
      );
      return;
    }
    submit(command.stream, command.event, effectSink, { stream: command.stream, event: command.event, origin, sink, token } satisfies EffectDispatch, origin);
  };

  // --- reading: state$ and runes$ ---------------------------------------------------------------

  const reads = engineReads({ homes, commits, outlets, read: readRunes, archived: archive !== undefined, machines });
  function runes$(): Observable<Rune>;
  function runes$(stream: string, options?: RunesOptions): Observable<Rune>;
  function runes$(stream?: string, options?: RunesOptions): Observable<Rune> {
    return stream === undefined ? outlets.all.asObservable() : reads.runes$(stream, options);
  }

  const release = (stream: string): void => homes.release(stream);

  /** Stops the epics, lets loads in progress settle and pending appends finish, then closes the store. */
  const shutDown = async (): Promise<void> => {
    closed = true;
    homes.close();
    stopFollowing?.();
    epicsRunning?.unsubscribe();
    await homes.settled();
    // A batch that loses a seq race starts a catch-up, whose retries join another batch.
    while (commits.flushing !== undefined) {
      await Promise.allSettled([commits.flushing]);
      await homes.settled();
    }
    await snapshots.saving;
    outlets.complete();
    errors.complete();
    await store.close();
  };
  let closing: Promise<void> | undefined;

  // Epics start on the next microtask, so an `errors$` subscribed right after createEngine hears
  // even an epic that fails at once.
  let epicsRunning: Subscription | undefined;
  queueMicrotask(() => {
    if (closed) return;
    epicsRunning = runEpics({
      epics,
      // Each rune reaches the epics of the one process that owns its stream.
      runes$: ownership === undefined ? outlets.all : outlets.all.pipe(filter((rune) => ownership.owns(rune.stream))),
      deps,
      context: {
        state: <S>(stream: string) => homes.get(stream)?.durableState as S | undefined,
        snapshot: <S>(stream: string) => defer(() => reads.snapshot<S>(stream)),
        read: (stream, afterSeq = 0) => reads.stored(stream, afterSeq),
        release,
        unpublishedSeq: (stream) => {
          const instance = homes.get(stream);
          return instance !== undefined && instance.seq > instance.durableSeq ? instance.seq : undefined;
        },
        streams: (query) => from(store.heads(query)),
        scheduler,
        valueCheck: checkValue,
        report: (report) => errors.next(report),
        ...(ownership === undefined ? {} : { ownership, allRunes$: outlets.all }),
      },
      dispatch: dispatchEffect,
      report: (report) => errors.next(report),
    });
  });

  const engine: Engine = {
    spawn,
    dispatch,
    submit,
    state$: reads.state$,
    snapshot: reads.snapshot,
    machineOf: (stream) => homes.get(stream)?.machine.id,
    runes$,
    release,
    errors$: errors.asObservable(),
    get size() {
      return homes.size;
    },
    machines,
    close: () => (closing ??= shutDown()),
  };
  return engine;
}
