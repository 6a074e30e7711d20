import { asyncScheduler, type SchedulerLike } from 'rxjs';
import type { AnyMachine } from '../../reducers/machine.js';
import { machines as builtInMachines } from '../../reducers/machines.js';
import { DEFAULT_VALUE_LIMITS, type ValueLimits } from '../../reducers/value-limits.js';
import type { ColdStore } from '../archive/cold-store.js';
import type { FenceOf } from '../commit-queue.js';
import type { EffectOwnership } from '../effect-host.js';
import type { Epic } from '../epic.js';
import { memoryStore } from '../memory-store.js';
import type { Fence, RuneStore } from '../store.js';

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

/** {@link EngineOptions} with every default filled in and every value checked. */
export interface ResolvedEngineOptions {
  readonly store: RuneStore;
  readonly scheduler: SchedulerLike;
  readonly machines: Readonly<Record<string, AnyMachine>>;
  readonly snapshotEvery: number;
  readonly retention: (stream: string, machine: string) => 'all' | 'snapshot';
  readonly epics: readonly Epic<any>[];
  readonly deps: unknown;
  readonly ownership: EffectOwnership | undefined;
  readonly limits: ValueLimits;
  readonly fence: Fence | FenceOf | undefined;
  readonly maxRaceLosses: number;
  readonly followStore: boolean;
  readonly archive: ColdStore | undefined;
}

/** The options of `createEngine`, defaults filled in; a value out of range throws a TypeError naming it. */
export function engineOptions(options: EngineOptions): ResolvedEngineOptions {
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
  return { store, scheduler, machines, snapshotEvery, retention, epics, deps, ownership, limits, fence, maxRaceLosses, followStore, archive: options.archive };
}
