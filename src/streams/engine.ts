import { Subject, defer, filter, from, type Observable, type Subscription } from 'rxjs';
import type { AnyMachine, EventObject } from '../reducers/machine.js';
import { SPAWN_EVENT_TYPE, type Rune } from '../reducers/rune.js';
import { describeIssues, eventRejection, parseBounded } from '../reducers/validate.js';
import { storableValue, valueCheck } from '../reducers/value-limits.js';
import { CommitQueue, type PendingRune } from './commit-queue.js';
import { dispatchChannel, reportingSink, sampler } from './diagnostics.js';
import { isSpawnCommand, runEpics, type EpicCommand, type EpicReport } from './epic.js';
import { Instances, isUnknownMachine, type Instance } from './instances.js';
import type { ArchiveError } from './archive/cold-store.js';
import { archivedReads } from './archived-reads.js';
import { Seals } from './seals.js';
import { Snapshots } from './snapshots.js';
import { StoreError, type RuneStore, type Snapshot } from './store.js';
import { foldTheirs, StoreFollower } from './follow-store.js';
import { PromisedDispatch, promiseSink, raceRetry, retrySink, type DispatchSink } from './submit.js';
import { engineOptions, type EngineOptions } from './engine/options.js';
import { Outlets } from './engine/outlets.js';
import { engineReads, type RunesOptions } from './engine/reads.js';
import { existsReason, notAStreamId, rejected, refusedValue, type DispatchResult } from './engine/rejections.js';

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
  spawn(stream: string, machine: string | AnyMachine, input?: unknown): Promise<DispatchResult>;
  /** Validates, applies and durably appends one event; resolves once its rune is durable. */
  dispatch(stream: string, event: unknown): Promise<DispatchResult>;
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
   */
  submit<T>(stream: string, event: unknown, sink: DispatchSink<T>, token: T): void;
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

/** An epic's dispatch on its way: `event` until it was submitted again with its strings made storable. */
interface EffectDispatch {
  readonly stream: string;
  event: unknown;
  /** The epic runner's sink of its outcome, and its token. */
  readonly sink: DispatchSink<any>;
  readonly token: unknown;
}

/** An event dispatched to a stream while it is being loaded: applied, in order, once it is. */
interface WaitingEvent {
  readonly event: unknown;
  readonly dispatchedAt: number;
  readonly sink: DispatchSink<any>;
  readonly token: unknown;
}

const valueOf = (state: unknown): string | undefined => {
  const value = typeof state === 'object' && state !== null ? (state as { value?: unknown }).value : undefined;
  return typeof value === 'string' ? value : undefined;
};

/** Runes read per page when a stream that lost a seq race is brought up to the store's head. */
const CATCH_UP_PAGE = 1000;

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
 * 4. With `followStore`, other writers' runes reach the engine from the store's `tail` (see
 *    {@link StoreFollower}). A dispatch that loses a seq race to another writer is applied again
 *    once the stream is brought up to the store's head, its missed runes published in seq order
 *    (up to `maxRaceLosses` times in a row, then rejected with `contention`).
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
  const instances = new Instances(store, machines, seals, (instance, loading) => applyWaitingOn(loading, instance.stream, instance), readFailed);
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
        const current = instances.isCurrent(instance);
        snapshots.counted(instance, current);
        // The hot path: no wrapper object per state.
        outlets.state(rune.stream, instance);
        outlets.rune(rune);
        if (instance.machine.seals !== undefined || instance.machine.holds !== undefined) seals.reached(rune.stream, rune.machine, rune.to);
        // A terminal state accepts no event: keeping the instance would only hold memory. Its state
        // stays in the log, where a later subscriber hydrates it from.
        if (rune.to !== undefined && instance.machine.terminal.length > 0 && instance.machine.terminal.includes(rune.to)) instance.releasing = true;
        if (instance.releasing && instance.durableSeq === instance.seq && current) instances.forget(instance.stream);
        if (follower?.waiting) follower.settled(instance.stream);
      },
      refused: (stream) => {
        instances.forget(stream);
        if (follower?.waiting) follower.settled(stream);
      },
      lost: (stream, runes) => lostRace(stream, runes),
      committed: () => (snapshots.due ? snapshots.saveSoon() : snapshots.saving),
    },
    { ...(writer === undefined ? {} : { writer }), ...(fence === undefined ? {} : { fence }) },
  );

  const follower =
    writer === undefined
      ? undefined
      : new StoreFollower(store as RuneStore & Required<Pick<RuneStore, 'tail'>>, writer, instances, commits, {
          state: (stream, instance) => outlets.state(stream, instance),
          watched: (stream) => outlets.watched(stream),
          rune: (rune) => {
            seals.reached(rune.stream, rune.machine, rune.to);
            outlets.rune(rune);
          },
        });

  // --- instances: spawn and hydration ------------------------------------------------------------

  const spawn = async (stream: string, machineOrId: string | AnyMachine, input?: unknown): Promise<DispatchResult> => {
    if (closed) return rejected('closed', 'the engine is closed');
    const notAnId = notAStreamId(stream);
    if (notAnId !== undefined) return notAnId;
    // Own properties only: "constructor" or "__proto__" must not find Object's.
    const machine = typeof machineOrId !== 'string' ? machineOrId : Object.hasOwn(machines, machineOrId) ? machines[machineOrId] : undefined;
    if (machine === undefined) {
      return rejected('unknown_machine', `unknown machine ${JSON.stringify(String(machineOrId).slice(0, 64))}; this engine hosts: ${Object.keys(machines).join(', ')}`);
    }
    const violation = checkValue(input, 'input');
    if (violation !== undefined) return refusedValue(violation, 'invalid_input');
    const parsed = parseBounded(machine.schemas.input, input);
    if (!parsed.success) return rejected('invalid_input', `invalid input for "${machine.id}": ${describeIssues(parsed.issues, parsed.partial)}`);
    if (instances.get(stream) !== undefined) return rejected('stream_exists', existsReason(machine, stream));
    // What the stream id says of the input, filled in (a turn engine's agent): stored so, in the spawn rune.
    const completed = machine.inputAt === undefined ? parsed.data : machine.inputAt(stream, parsed.data);
    const misplaced = machine.streamReason?.(stream, completed);
    if (misplaced !== undefined) return rejected('invalid_stream', misplaced);
    const outOfLayout = machine.layoutReason?.(stream);
    if (outOfLayout !== undefined) return rejected('invalid_layout', outOfLayout);
    const otherKind = machine.otherKindOf?.(stream);
    let conflict: DispatchResult | undefined;

    // Claim the id at once, while a load in progress (a dispatch or subscription that came first)
    // and the store are asked, so a spawn or dispatch made after this one waits for it; if the
    // stream exists already, the dispatchers get it hydrated and the spawn is refused.
    let spawned: Promise<DispatchResult> | undefined;
    const claim = instances.claim(
      stream,
      () => {
        const state = machine.initial(completed);
        return {
          stream,
          machine,
          state,
          seq: 1,
          at: scheduler.now(),
          durableState: undefined,
          durableSeq: 0,
          sinceSnapshot: 0,
          releasing: false,
          sealedBy: undefined,
          heldBy: undefined,
          sealGeneration: -1,
        };
      },
      (instance) => {
        const to = valueOf(instance.state);
        const event = { type: SPAWN_EVENT_TYPE, input: completed };
        const { at } = instance;
        const rune: Rune =
          to === undefined
            ? { stream, seq: 1, machine: machine.id, kind: machine.spawnKind, event, at }
            : { stream, seq: 1, machine: machine.id, kind: machine.spawnKind, event, to, at };
        if (machine.spawnPayload !== undefined) rune.payload = machine.spawnPayload(completed, instance.state);
        const call = new PromisedDispatch();
        commits.enqueue(instance, rune, instance.state, promiseSink, call);
        spawned = call.promise();
      },
      otherKind === undefined
        ? undefined
        : {
            stream: otherKind,
            found: () => {
              conflict = rejected('agent_kind_conflict', `an agent has one kind: "${otherKind}" exists, so "${stream}" (${machine.id}) cannot be spawned beside it`);
            },
          },
    );
    // Stored already, under a machine this engine does not host: it exists all the same.
    const existing = await claim.catch((error: unknown) => (isUnknownMachine(error) ? null : Promise.reject(error)));
    const sealedBy = existing === undefined ? seals.refusal(stream) : undefined;
    if (sealedBy !== undefined) return rejected('sealed', sealedBy);
    return spawned ?? conflict ?? rejected('stream_exists', existsReason(machine, stream));
  };

  // --- dispatch ---------------------------------------------------------------------------------

  /** Applies an event dispatched at `dispatchedAt` (scheduler time) to an instance in memory. */
  const apply = <T>(instance: Instance, value: unknown, dispatchedAt: number, sink: DispatchSink<T>, token: T): void => {
    // Looked up again only after a new seal: one comparison a dispatch on the hot path.
    if (instance.sealGeneration !== seals.generation) {
      instance.sealedBy = seals.refusal(instance.stream);
      instance.heldBy = seals.hold(instance.stream);
      instance.sealGeneration = seals.generation;
    }
    if (instance.sealedBy !== undefined) return sink.result(rejected('sealed', instance.sealedBy), token);
    if (instance.heldBy !== undefined) {
      const type = typeof value === 'object' && value !== null ? (value as { type?: unknown }).type : undefined;
      if (typeof type === 'string' && instance.heldBy.types.has(type)) {
        return sink.result(rejected('held', `event "${type}" is held back: ${instance.heldBy.by} (its streams take no ${type} until it is not)`), token);
      }
    }
    const { machine } = instance;
    const parsed = parseBounded(machine.schemas.event, value);
    if (!parsed.success) {
      const { code, reason } = eventRejection(machine, value, parsed.issues, parsed.partial);
      return sink.result(rejected(code, reason), token);
    }
    const from = instance.state;
    const step = machine.step(from, parsed.data as EventObject);
    if (!step.accepted) return sink.result(rejected(step.code, step.reason), token);
    instance.state = step.state;
    const seq = ++instance.seq;
    const fromValue = valueOf(from);
    const to = valueOf(step.state);
    const { stream } = instance;
    const event = parsed.data as Rune['event'];
    const at = dispatchedAt > instance.at ? dispatchedAt : instance.at;
    instance.at = at;
    // Whole literals: conditional spreads would cost a slow copy on the hot path.
    const rune: Rune =
      fromValue !== undefined && to !== undefined
        ? { stream, seq, machine: machine.id, kind: step.kind, event, from: fromValue, to, at }
        : { stream, seq, machine: machine.id, kind: step.kind, event, at };
    // Added only when there is one: a rune without payload has no `payload` key at all.
    if (step.payload !== undefined) rune.payload = step.payload;
    commits.enqueue(instance, rune, step.state, sink, token);
  };

  /** Per load in progress, the events dispatched to its stream meanwhile, in order: one wait per load, not per event. */
  const waiting = new Map<Promise<Instance | undefined>, WaitingEvent[]>();

  /**
   * Applies the events that waited for `loaded`, in the order they came, to the instance it
   * loaded (or answers them). Called as the instance enters memory, before anything dispatched
   * after it can reach it, and again when `loaded` settles (then there is nothing left to do).
   */
  const applyWaitingOn = (loaded: Promise<Instance | undefined>, stream: string, instance: Instance | undefined): void => {
    const queue = waiting.get(loaded);
    if (queue === undefined) return;
    waiting.delete(loaded);
    for (const w of queue) {
      if (closed) w.sink.result(rejected('closed', 'the engine is closed'), w.token);
      else if (instance === undefined) w.sink.result(rejected('unknown_stream', `unknown stream "${stream}"`), w.token);
      else apply(instance, w.event, w.dispatchedAt, w.sink, w.token);
    }
  };

  /**
   * The promise-free dispatch: checks the event against the limits, then validates, applies and
   * commits it, and tells `sink` the outcome with `token` (at once with the memory store, when the
   * batch commits with a store that does I/O). `dispatch` and `dispatchTo` both go through here.
   */
  const submit = <T>(stream: string, event: unknown, sink: DispatchSink<T>, token: T): void => {
    // Timed only while someone listens (metrics), and then one dispatch in a sample.
    if (dispatchChannel.hasSubscribers && sink !== reportingSink && sampled()) return submit(stream, event, reportingSink, { sink, token, startedAt: performance.now() });
    if (closed) return sink.result(rejected('closed', 'the engine is closed'), token);
    const notAnId = notAStreamId(stream);
    if (notAnId !== undefined) return sink.result(notAnId, token);
    const violation = checkValue(event, 'event');
    if (violation !== undefined) return sink.result(refusedValue(violation, 'invalid_event'), token);
    // A rune's `at` is when its event was dispatched, even if the stream had to be hydrated first:
    // a timer that fires at its deadline stamps its rune with the deadline.
    enter(stream, event, scheduler.now(), sink, token);
  };

  /**
   * Applies a checked event to its stream's instance: at once if it is in memory, else once it is
   * loaded (or caught up), behind the events already waiting for that.
   */
  const enter = <T>(stream: string, event: unknown, dispatchedAt: number, sink: DispatchSink<T>, token: T): void => {
    const loaded = instances.load(stream);
    if (!(loaded instanceof Promise)) return apply(loaded, event, dispatchedAt, sink, token);
    const queue = waiting.get(loaded);
    if (queue !== undefined) {
      queue.push({ event, dispatchedAt, sink, token });
      return;
    }
    const first: WaitingEvent[] = [{ event, dispatchedAt, sink, token }];
    waiting.set(loaded, first);
    const applyWaiting = (instance: Instance | undefined): void => applyWaitingOn(loaded, stream, instance);
    const failWaiting = (error: unknown): void => {
      if (waiting.get(loaded) !== first) return;
      waiting.delete(loaded);
      for (const w of first) {
        if (isUnknownMachine(error)) w.sink.result(rejected('unknown_machine', error.message), w.token);
        else w.sink.error(error, w.token);
      }
    };
    loaded.then(applyWaiting, failWaiting);
  };

  const dispatch = (stream: string, event: unknown): Promise<DispatchResult> => {
    const call = new PromisedDispatch();
    submit(stream, event, promiseSink, call);
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
      submit(effect.stream, event, effectSink, effect);
    },
    error: (error, effect) => effect.sink.error(error, effect.token),
  };

  /** What an epic emits, dispatched or spawned: its strings made storable rather than refused (see `effectSink`). */
  const dispatchEffect = <T>(command: EpicCommand, sink: DispatchSink<T>, token: T): void => {
    if (isSpawnCommand(command)) {
      spawn(command.stream, command.spawn, storableValue(command.input, limits.maxDepth)).then(
        (result) => sink.result(result, token),
        (error: unknown) => sink.error(error, token),
      );
      return;
    }
    submit(command.stream, command.event, effectSink, { stream: command.stream, event: command.event, sink, token } satisfies EffectDispatch);
  };

  // --- a lost seq race: catch up, then try again -------------------------------------------------

  /** The catch-ups in progress (see `lostRace`): closing waits for them. */
  const catchUps = new Set<Promise<Instance>>();

  /**
   * Folds the store's runes after `instance`'s last durable one into it, publishing each (a page at
   * a time, up to the head); those the follower brings meanwhile are folded by it and skipped here.
   */
  const readUp = async (instance: Instance): Promise<Instance> => {
    for (;;) {
      const page = await store.read(instance.stream, instance.durableSeq, CATCH_UP_PAGE);
      for (const rune of page) {
        if (!instances.isCurrent(instance)) return instance;
        if (rune.seq === instance.durableSeq + 1) foldTheirs(instance, rune, commits);
      }
      if (page.length < CATCH_UP_PAGE) return instance;
    }
  };

  /**
   * Another writer took the seq of `stream`'s runes (`runes`, in seq order, none durable). A spawn
   * among them is refused (the stream exists); every other event is applied again, in order, to
   * the state the store now has, unless it lost `maxRaceLosses` times in a row (`contention`). The
   * instance goes back to its durable state, the other writer's runes the follower holds behind
   * it are folded in, and the rest are read from the store, each published once, in seq order;
   * events dispatched meanwhile wait behind the ones that lost.
   */
  const lostRace = (stream: string, runes: readonly PendingRune<Instance>[]): void => {
    const { instance } = runes[0]!;
    const retries: WaitingEvent[] = [];
    /** The dispatches answered without another try: told last, once the stream is set to catch up. */
    const answered: PendingRune<Instance>[] = [];
    for (const p of runes) {
      const retry = raceRetry(p.sink, p.token);
      if (p.rune.seq === 1 || retry.losses >= maxRaceLosses) answered.push(p);
      else retries.push({ event: p.rune.event, dispatchedAt: p.rune.at, sink: retrySink, token: retry });
    }
    if (instance.durableSeq === 0 || !instances.isCurrent(instance)) {
      // Its spawn lost: there is no durable state to go back to. The retries hydrate the stream.
      if (instances.isCurrent(instance)) instances.forget(stream);
      follower?.settled(stream);
      for (const w of retries) enter(stream, w.event, w.dispatchedAt, w.sink, w.token);
    } else catchUp(instance, retries);
    for (const { rune, sink, token } of answered) {
      if (rune.seq === 1) sink.result(rejected('stream_exists', existsReason(instance.machine, stream)), token);
      else sink.result(rejected('contention', `stream "${stream}": another writer took its next seq ${maxRaceLosses} times in a row; nothing was appended`), token);
    }
  };

  /**
   * Brings `instance`, back at its durable state, up to the store's head (`readUp`), then applies
   * `retries` to it, and the events dispatched meanwhile after them.
   */
  const catchUp = (instance: Instance, retries: WaitingEvent[]): void => {
    const { stream } = instance;
    instance.state = instance.durableState;
    instance.seq = instance.durableSeq;
    // Started on the next microtask: registered first, so a dispatch made from inside a subscriber
    // told of the follower's runes below waits behind the retries.
    const ready = Promise.resolve().then(() => readUp(instance));
    instances.catchUp(stream, ready);
    waiting.set(ready, retries);
    catchUps.add(ready);
    follower?.settled(stream);
    const done = (): WaitingEvent[] => {
      catchUps.delete(ready);
      instances.caughtUp(stream);
      const queue = waiting.get(ready) ?? [];
      waiting.delete(ready);
      return queue;
    };
    ready.then(
      () => {
        // Each through `enter`: one that loses again starts another catch-up, which the rest wait for.
        // One that left memory meanwhile is hydrated afresh.
        for (const w of done()) {
          if (closed) w.sink.result(rejected('closed', 'the engine is closed'), w.token);
          else enter(stream, w.event, w.dispatchedAt, w.sink, w.token);
        }
      },
      (error: unknown) => {
        instances.forget(stream);
        for (const w of done()) w.sink.error(error, w.token);
      },
    );
  };

  // --- reading: state$ and runes$ ---------------------------------------------------------------

  const reads = engineReads({ instances, commits, outlets, read: readRunes, archived: archive !== undefined });
  function runes$(): Observable<Rune>;
  function runes$(stream: string, options?: RunesOptions): Observable<Rune>;
  function runes$(stream?: string, options?: RunesOptions): Observable<Rune> {
    return stream === undefined ? outlets.all.asObservable() : reads.runes$(stream, options);
  }

  const release = (stream: string): void => instances.release(stream);

  /** Stops the epics, lets loads in progress settle and pending appends finish, then closes the store. */
  const shutDown = async (): Promise<void> => {
    closed = true;
    follower?.stop();
    epicsRunning?.unsubscribe();
    await instances.settled();
    // A batch that loses a seq race starts a catch-up, whose retries join another batch.
    while (commits.flushing !== undefined || catchUps.size > 0) await Promise.allSettled([commits.flushing, ...catchUps]);
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
        state: <S>(stream: string) => instances.get(stream)?.durableState as S | undefined,
        snapshot: <S>(stream: string) => defer(() => reads.snapshot<S>(stream)),
        read: (stream, afterSeq = 0) => reads.stored(stream, afterSeq),
        release,
        unpublishedSeq: (stream) => {
          const instance = instances.get(stream);
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
    machineOf: (stream) => instances.get(stream)?.machine.id,
    runes$,
    release,
    errors$: errors.asObservable(),
    get size() {
      return instances.size;
    },
    machines,
    close: () => (closing ??= shutDown()),
  };
  return engine;
}
