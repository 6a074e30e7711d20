import { Observable, Subject, asyncScheduler, concatMap, defer, filter, from, type SchedulerLike, type Subscription } from 'rxjs';
import type { AnyMachine, EventObject, RejectionCode } from '../reducers/machine.js';
import { machines as builtInMachines } from '../reducers/machines.js';
import { SPAWN_EVENT_TYPE, type Rune } from '../reducers/rune.js';
import { describeIssues, eventRejection, parseBounded } from '../reducers/validate.js';
import { DEFAULT_VALUE_LIMITS, isStorableText, storableValue, valueCheck, type ValueLimitCode, type ValueLimits, type ValueViolation } from '../reducers/value-limits.js';
import type { EffectOwnership } from './effect-host.js';
import { CommitQueue, type FenceOf, type PendingRune } from './commit-queue.js';
import { dispatchChannel, rejectionChannel, reportingSink, runeChannel, sampler, type RejectionReport } from './diagnostics.js';
import { isSpawnCommand, runEpics, type Epic, type EpicCommand, type EpicReport } from './epic.js';
import { Instances, isUnknownMachine, type Instance } from './instances.js';
import { KeyedListeners } from './keyed-listeners.js';
import { StreamReadError } from './stream-read-error.js';
import type { ArchiveError, ColdStore } from './archive/cold-store.js';
import { archivedReads } from './archived-reads.js';
import { memoryStore } from './memory-store.js';
import { replayThenLive } from './replay-then-live.js';
import { Seals } from './seals.js';
import { Snapshots } from './snapshots.js';
import { StoreError, type Fence, type RuneStore, type Snapshot } from './store.js';
import { foldTheirs, StoreFollower } from './follow-store.js';
import { PromisedDispatch, promiseSink, raceRetry, registerSubmit, retrySink, type DispatchSink } from './submit.js';

/**
 * Why the engine refused a spawn or a dispatch. The machine's own codes, plus:
 * - `unknown_stream`: no stream of that id was spawned.
 * - `invalid_stream`: a dispatch's or spawn's stream id is not a non-empty string, or has a NUL
 *   character or a lone surrogate (no store keeps it as it is), or a spawn's is not where its
 *   machine's instances live (its `streamReason`: an `agent-registration` only at
 *   `agent-def/<its definition's name>`).
 * - `invalid_layout`: a spawn's stream is not where the agent layout puts its machine's instances
 *   (its `layoutReason`: a `turn-engine` only at `<root>/agent/<a>/turn`, an `agent-lifecycle`
 *   only at `<root>/agent/<a>`; see `agentStreams`), where no agent epic would ever run it.
 * - `agent_kind_conflict`: a spawn of one kind of agent where the same agent's other kind exists
 *   (its `otherKindOf`: `<root>/agent/<a>/react` beside `.../turn`, or the reverse), in memory or
 *   only in the store: an agent id has one kind. The reason names the existing stream. Of two
 *   such spawns racing in one engine, the first wins.
 * - `stream_exists`: a second spawn of a stream.
 * - `unknown_machine`: the machine id is not one this engine hosts.
 * - `invalid_input`: the spawn input fails the machine's input schema, or has a `__proto__` key.
 * - `too_deep`, `string_too_long`, `too_many_keys`, `array_too_long`: a spawn input or an event
 *   over one of the engine's `limits` (checked before the schema; the reason names the path and limit).
 * - `invalid_string`: a string or object key of a spawn input or an event has a NUL character
 *   (`\u0000`) or a lone surrogate, which no store keeps (PostgreSQL's jsonb refuses both): refused
 *   on every store alike, in the same walk as the limits; the reason names the path, what and where.
 * - `sealed`: the stream is under one whose machine seals it in its state (a closed or archived
 *   conversation's `conv/<c>/...`); the reason names the sealing stream. Known after a restart.
 * - `held`: the event's type is held back by a stream above it in its state (its machine's
 *   `holds`: a paused conversation takes no `start_turn` for `conv/<c>/agent/<a>/turn`); the
 *   reason names that stream and its state. Known after a restart; released when it leaves the state.
 * - `contention`: the dispatch lost the race for its stream's next seq to other writers
 *   `maxRaceLosses` times in a row (each time applied again to the newer state); nothing was
 *   appended. The reason names the stream.
 * - `closed`: the engine is closed.
 *
 * An event with a `__proto__` key is refused as `invalid_event`.
 */
export type EngineRejectionCode =
  | RejectionCode
  | ValueLimitCode
  | 'invalid_string'
  | 'unknown_stream'
  | 'invalid_stream'
  | 'invalid_layout'
  | 'agent_kind_conflict'
  | 'stream_exists'
  | 'unknown_machine'
  | 'invalid_input'
  | 'contention'
  | 'closed';

/** What `spawn` and `dispatch` resolve to: the durable rune, or why nothing was appended. */
export type DispatchResult = { accepted: true; rune: Rune } | { accepted: false; code: EngineRejectionCode; reason: string };

/** Options of {@link createEngine}; every one has a default. */
export interface EngineOptions {
  /** Where runes are kept. Default: `memoryStore()`. */
  store?: RuneStore;
  /** The clock of every rune's `at` and of every timer. Default: rxjs `asyncScheduler`. */
  scheduler?: SchedulerLike;
  /** The machines streams can be spawned with and hydrated as, by id. Default: every seed machine. */
  machines?: Readonly<Record<string, AnyMachine>>;
  /** Save a snapshot of a stream every this many runes (0: never). Default: 1000. */
  snapshotEvery?: number;
  /**
   * Whether a stream keeps the runes a snapshot covers. `'all'` keeps every rune; `'snapshot'`
   * prunes the runes a new snapshot covers (its history is then the snapshot). Default: `'all'`.
   */
  retention?: (stream: string, machine: string) => 'all' | 'snapshot';
  /** Side effects: each sees the live runes and emits commands, which are dispatched. Default: none. */
  epics?: readonly Epic<any>[];
  /** The third argument of every epic (an LLM client, tools, ...). Default: `undefined`. */
  deps?: unknown;
  /**
   * Bounds on every spawn input and dispatched event, checked before the machine's schema, so
   * nothing is stored that is costly to describe or cannot be hydrated. Each may be `Infinity`
   * (the walk then still refuses a string no store keeps, `invalid_string`). Defaults: `maxDepth` 64, `maxStringLength` 1,000,000
   * (UTF-16 code units, keys too), `maxKeys` 1,000 (per object), `maxArrayLength` 10,000.
   */
  limits?: Partial<ValueLimits>;
  /**
   * Which streams' effects this engine runs: several processes on one log split them by lease.
   * Epics hear only the live runes of the streams it owns, and `stateEffects` resume only those
   * (and follow its `changes$`). Default: all.
   */
  ownership?: EffectOwnership;
  /**
   * Whether other writers append to this engine's store (other engines on one memory store, other
   * processes on a PostgreSQL store): the engine then follows the store's `tail`, folding their
   * runes into its instances and publishing them, so `state$`, `runes$` and epics carry them
   * live. Needs a store with `tail`. Default `false`: the engine takes itself for the only writer,
   * and learns of another writer's runes only when a dispatch loses the seq race to them (see
   * `maxRaceLosses`).
   */
  followStore?: boolean;
  /**
   * A dispatch that loses the race for its stream's next seq to another writer (a
   * `StoreConflictError` from the store) is applied again to the newer state: the runes it missed
   * are folded and published first, then its event is accepted with a later seq or rejected with
   * the machine's reason; a spawn that loses is rejected as `stream_exists`. After this many losses
   * in a row, it is rejected with `contention`. A positive integer. Default: 50 (three processes pinging one stream in tight loops on a loaded 2-core machine lost 10 in a row).
   */
  maxRaceLosses?: number;
  /**
   * This engine's lease as a fencing token, carried by its appends: a store that fences refuses
   * them once a newer epoch of the lease was raised (`RuneStore.raiseFence`), so an owner that lost
   * its lease cannot write any more (each dispatch then fails with a `StoreFencedError`, which
   * names the lease). Either one fence for every append, or a function giving the fence a stream's
   * runes are written under (a lease manager's `fenceOf`, one lease per share of the streams;
   * `undefined`: none): a batch then carries its streams' fences, and a fence refused fails only
   * the dispatches of the streams under that lease, while the batch's other streams are appended
   * again. A store with one writer by construction (SQLite) ignores it. Default: none.
   */
  fence?: Fence | FenceOf;
  /**
   * Where archived streams live (the archival epic's cold store): `runes$` and an epic's `read`
   * then serve the runes pruned from the hot log from their archive, read-only (an archived
   * conversation's streams are sealed, so a dispatch to them is refused with `sealed`). A damaged
   * archive fails the read with its `ArchiveError` (`checksum_mismatch`, naming the segment, ...),
   * reported on `errors$` as `archive_damaged`: never served as if the runes were pruned. Default:
   * none (a read of pruned runes sees the gap).
   */
  archive?: ColdStore;
}

/** Something went wrong outside any caller's request; the engine carries on. */
export type EngineError =
  | { type: 'snapshot_failed'; stream: string; error: unknown }
  /** A read of a stream's archived runes found its archive damaged (`error.code` says how, its message names the segment). */
  | { type: 'archive_damaged'; stream: string; error: ArchiveError }
  /** A read of a stream's stored runes found one that does not match its hash chain (`chain_broken`, naming the seq): the stream is refused. */
  | { type: 'stream_corrupt'; stream: string; error: StoreError }
  | EpicReport;

/** Options of `runes$(stream, options)`. */
export interface RunesOptions {
  /** Replay the stored runes with `seq > afterSeq` first. Default: 0 (the whole stream). */
  afterSeq?: number;
}

/** An engine hosting many machine instances, each under a stream id. */
export interface Engine {
  /** Creates `stream` as an instance of `machine` (an id or a machine): its first rune. */
  spawn(stream: string, machine: string | AnyMachine, input?: unknown): Promise<DispatchResult>;
  /** Validates, applies and durably appends one event; resolves once its rune is durable. */
  dispatch(stream: string, event: unknown): Promise<DispatchResult>;
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

/** Why a spawn of an existing stream is refused: the machine's words, when it has them. */
const existsReason = (machine: AnyMachine, stream: string): string => machine.existsReason?.(stream) ?? `stream "${stream}" already exists`;
const rejected = (code: EngineRejectionCode, reason: string): DispatchResult => {
  if (rejectionChannel.hasSubscribers) rejectionChannel.publish({ code } satisfies RejectionReport);
  return { accepted: false, code, reason };
};

/**
 * The refusal of a stream id that is not a non-empty string, or that no store keeps as it is (a
 * NUL character; a lone surrogate, which UTF-8 storage would turn into another id); checked by
 * spawn and dispatch alike.
 */
const notAStreamId = (stream: unknown): DispatchResult | undefined =>
  typeof stream !== 'string' || stream.length === 0
    ? rejected('invalid_stream', `a stream id must be a non-empty string, got ${typeof stream === 'string' ? '""' : typeof stream}`)
    : isStorableText(stream)
      ? undefined
      : rejected('invalid_stream', 'a stream id must have no NUL character (\\u0000) and no lone surrogate: no store keeps this one as it is');

/** A value over the limits, refused with its limit's code; a `__proto__` key with `invalidCode`. */
const refusedValue = (violation: ValueViolation, invalidCode: 'invalid_event' | 'invalid_input'): DispatchResult =>
  rejected(violation.code === 'forbidden_key' ? invalidCode : violation.code, violation.reason);

/** The `limits` option merged over the defaults, each checked: a positive integer or `Infinity`. */
function valueLimitsOption(given: Partial<ValueLimits> | undefined): ValueLimits {
  if (given === undefined) return DEFAULT_VALUE_LIMITS;
  if (typeof given !== 'object' || given === null) throw new TypeError(`createEngine: "limits" must be an object, got ${String(given)}`);
  for (const name of Object.keys(given)) {
    if (!Object.hasOwn(DEFAULT_VALUE_LIMITS, name)) {
      throw new TypeError(`createEngine: unknown limit "limits.${name}"; the limits are ${Object.keys(DEFAULT_VALUE_LIMITS).join(', ')}`);
    }
  }
  const limits = { ...DEFAULT_VALUE_LIMITS, ...given };
  for (const [name, value] of Object.entries(limits)) {
    if (value !== Infinity && !(Number.isInteger(value) && value > 0)) {
      throw new TypeError(`createEngine: "limits.${name}" must be a positive integer or Infinity, got ${String(value)}`);
    }
  }
  return limits;
}

/** The `fence` option, checked: a function, or a non-empty lease name and a non-negative integer epoch. */
function fenceOption(fence: unknown): Fence | FenceOf | undefined {
  if (fence === undefined || typeof fence === 'function') return fence as FenceOf | undefined;
  const { lease, epoch } = (typeof fence === 'object' && fence !== null ? fence : {}) as Partial<Fence>;
  if (typeof lease !== 'string' || lease.length === 0 || !Number.isInteger(epoch) || epoch! < 0) {
    throw new TypeError(
      `createEngine: "fence" must be { lease: a non-empty string, epoch: a non-negative integer } or a function of the stream, got ${JSON.stringify(fence)}`,
    );
  }
  return { lease, epoch: epoch! };
}

/** Runes read per page when a stream that lost a seq race is brought up to the store's head. */
const CATCH_UP_PAGE = 1000;
/** Runes read per page of a stored replay (`runes$` after a seq, an epic's `read`). */
const READ_PAGE = 1000;

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
  const {
    store = memoryStore(),
    scheduler = asyncScheduler,
    machines = builtInMachines as Readonly<Record<string, AnyMachine>>,
    snapshotEvery = 1000,
    retention = () => 'all' as const,
    epics = [],
    deps,
    ownership,
  } = options;
  if (!Number.isInteger(snapshotEvery) || snapshotEvery < 0) {
    throw new TypeError(`createEngine: "snapshotEvery" must be a non-negative integer, got ${String(snapshotEvery)}`);
  }
  const limits = valueLimitsOption(options.limits);
  const fence = fenceOption(options.fence);
  const maxRaceLosses = options.maxRaceLosses ?? 50;
  if (!Number.isInteger(maxRaceLosses) || maxRaceLosses < 1) throw new TypeError(`createEngine: "maxRaceLosses" must be a positive integer, got ${String(maxRaceLosses)}`);
  const followStore = options.followStore ?? false;
  if (typeof followStore !== 'boolean') throw new TypeError(`createEngine: "followStore" must be a boolean, got ${String(followStore)}`);
  if (followStore && typeof store.tail !== 'function') {
    throw new TypeError('createEngine: "followStore" needs a store with tail (one several writers share, like memoryStore); this store has none');
  }
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
    options.archive === undefined
      ? storeRead
      : archivedReads({ read: storeRead, head: (stream) => store.head(stream) }, options.archive, (stream, error) => errors.next({ type: 'archive_damaged', stream, error }));
  const sampled = sampler();
  /** Per stream, the instance at each durable rune: its listeners read its durable state and seq. */
  const liveStates = new KeyedListeners<Instance>();
  const liveRunes = new KeyedListeners<Rune>();
  const allRunes = new Subject<Rune>();
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
        // The hot path: no wrapper object per state, and no subject call nobody hears.
        liveStates.next(rune.stream, instance);
        liveRunes.next(rune.stream, rune);
        if (allRunes.observed) allRunes.next(rune);
        if (runeChannel.hasSubscribers) runeChannel.publish(rune);
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
          state: (stream, instance) => liveStates.next(stream, instance),
          watched: (stream) => liveStates.has(stream),
          rune: (rune) => {
            seals.reached(rune.stream, rune.machine, rune.to);
            liveRunes.next(rune.stream, rune);
            if (allRunes.observed) allRunes.next(rune);
            if (runeChannel.hasSubscribers) runeChannel.publish(rune);
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

  const state$ = <S>(stream: string): Observable<S> =>
    new Observable<S>((subscriber) => {
      // The seq of the last state emitted: each durable state is emitted once, in order.
      let seen = 0;
      const emit = (seq: number, state: unknown): void => {
        if (seq <= seen) return;
        seen = seq;
        subscriber.next(state as S);
      };
      // Subscribed before loading, so a state published meanwhile is not missed.
      const stop = liveStates.add(stream, {
        next: (instance) => emit(instance.durableSeq, instance.durableState),
        complete: () => subscriber.complete(),
      });
      const current = (loaded: Instance | undefined): void => {
        if (loaded === undefined) subscriber.error(new StreamReadError('unknown_stream', `unknown stream "${stream}"`));
        else emit(loaded.durableSeq, loaded.durableState); // durableSeq 0: a spawn not yet durable
      };
      // In memory, the current state comes at once: a dispatch right after subscribing follows it.
      const loaded = instances.load(stream);
      if (loaded instanceof Promise) loaded.then(current, (error: unknown) => subscriber.error(error));
      else current(loaded);
      return stop;
    });

  const snapshot = async <S>(stream: string): Promise<Snapshot<S> | undefined> => {
    const instance = await instances.load(stream);
    // durableSeq 0: its spawn is not durable yet; wait for the batch that carries it.
    while (instance !== undefined && instance.durableSeq === 0 && commits.flushing !== undefined) await commits.flushing;
    if (instance === undefined || instance.durableSeq === 0) return undefined;
    return { stream, seq: instance.durableSeq, state: instance.durableState as S };
  };

  function runes$(): Observable<Rune>;
  function runes$(stream: string, options?: RunesOptions): Observable<Rune>;
  function runes$(stream?: string, options: RunesOptions = {}): Observable<Rune> {
    if (stream === undefined) return allRunes.asObservable();
    return replayThenLive({
      stream,
      afterSeq: options.afterSeq ?? 0,
      read: (afterSeq, limit) => readRunes(stream, afterSeq, limit),
      live$: new Observable<Rune>((subscriber) => liveRunes.add(stream, subscriber)),
    });
  }

  /**
   * A stream's stored runes after `afterSeq`, in pages of {@link READ_PAGE}. A store gives a short
   * page only at the stream's end, so a short page ends the read without asking again (a read of
   * a few new runes, as a model call's turn history makes, is one query); an archive may end a
   * page at a segment's end, so through one the read goes on until a page is empty.
   */
  async function* storedPages(stream: string, afterSeq: number): AsyncGenerator<readonly Rune[]> {
    for (let after = afterSeq; ; ) {
      const page = await readRunes(stream, after, READ_PAGE);
      if (page.length > 0) yield page;
      if (page.length === 0 || (page.length < READ_PAGE && options.archive === undefined)) return;
      after = page[page.length - 1]!.seq;
    }
  }
  // A page's runes are emitted at once, one after another: an async generator's rune at a time
  // costs a promise per rune, and a model call reads its whole turn stream.
  const storedRunes = (stream: string, afterSeq: number): Observable<Rune> => from(storedPages(stream, afterSeq)).pipe(concatMap((page) => page));

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
    allRunes.complete();
    errors.complete();
    liveStates.complete();
    liveRunes.complete();
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
      runes$: ownership === undefined ? allRunes : allRunes.pipe(filter((rune) => ownership.owns(rune.stream))),
      deps,
      context: {
        state: <S>(stream: string) => instances.get(stream)?.durableState as S | undefined,
        snapshot: <S>(stream: string) => defer(() => snapshot<S>(stream)),
        read: (stream, afterSeq = 0) => storedRunes(stream, afterSeq),
        release,
        unpublishedSeq: (stream) => {
          const instance = instances.get(stream);
          return instance !== undefined && instance.seq > instance.durableSeq ? instance.seq : undefined;
        },
        streams: (query) => from(store.heads(query)),
        scheduler,
        valueCheck: checkValue,
        report: (report) => errors.next(report),
        ...(ownership === undefined ? {} : { ownership, allRunes$: allRunes }),
      },
      dispatch: dispatchEffect,
      report: (report) => errors.next(report),
    });
  });

  const engine: Engine = {
    spawn,
    dispatch,
    state$,
    snapshot,
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
  registerSubmit(engine, submit);
  return engine;
}
