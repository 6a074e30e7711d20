import type { Rune } from '../reducers/rune.js';

/** What a store knows of a stream without reading its runes: its machine and its last seq. */
export interface StreamHead {
  readonly stream: string;
  /** The id of the machine the stream was spawned with. */
  readonly machine: string;
  /** The seq of the stream's last rune (its rune count, pruned runes included). */
  readonly seq: number;
  /** The state name after the last rune (its `to`), for finite machines. */
  readonly value?: string;
  /** The last rune's `at`: when the stream last changed, in scheduler time. */
  readonly at: number;
}

/** Which streams `heads` lists; every field narrows the list. */
export interface HeadsQuery {
  /** Only streams of this machine id. */
  readonly machine?: string;
  /** Only streams whose state name is one of these. */
  readonly values?: readonly string[];
  /** Only streams whose id starts with this (a conversation's `conv/<c>/`): read from there on, not all. */
  readonly prefix?: string;
}

/** A state folded from a stream's runes `1..seq`: hydration starts here and folds the rest. */
export interface Snapshot<S = unknown> {
  readonly stream: string;
  readonly seq: number;
  readonly state: S;
  /** In a store: the version of the machine that folded `state` (`Machine.version`); absent: 1. */
  readonly v?: number;
}

/**
 * A writer's lease, as a fencing token: `lease` names what is leased (the whole log, or a share of
 * its streams), `epoch` counts its owners, each new owner taking a higher one. A store that fences
 * refuses the appends of an owner whose epoch is older than the newest it has seen of that lease,
 * so an owner that was paused (a long GC, a suspended VM) while its lease moved on cannot write
 * once it wakes up.
 */
export interface Fence {
  readonly lease: string;
  readonly epoch: number;
}

/** What an append says about who makes it. */
export interface AppendOptions {
  /**
   * The writer's id, handed to `tail` listeners with each of its runes, so that a writer that
   * follows the store can tell its own runes from the others'. Stores that do not tail ignore it.
   */
  readonly writer?: string;
  /**
   * The writer's leases the batch is written under (one per share of the streams it writes that
   * the writer owns), each checked by a store that fences (see {@link RuneStore.raiseFence}): one
   * older than its lease's newest epoch refuses the whole batch.
   */
  readonly fences?: readonly Fence[];
}

/**
 * Told each rune a store commits, in commit order: its `position` in that order (increasing, maybe
 * with gaps) and the `writer` its append named. Called after the commit; it must not throw.
 */
export type TailListener = (rune: Rune, position: number, writer: string | undefined) => void;

/**
 * Where runes live: what makes the log durable and keeps it honest, whoever writes to it.
 *
 * `append` is the one write path and it is all-or-nothing: a batch of runes of any streams is
 * committed in one transaction, or not at all. An accepted dispatch is acknowledged only after its
 * batch's `append` resolved.
 *
 * ## Several writers
 *
 * The contract holds with several writers on one store (engines of one process on a memory store,
 * processes on a PostgreSQL store); the SQLite store has one writer process per file by its lock.
 *
 * 1. **Expected seq per stream.** A stream's runes in a batch must continue its head without gap:
 *    the first one's seq is the expected one, `head + 1` (seq 1 is the spawn, which creates the
 *    stream and records its machine). Otherwise the whole batch is refused with a
 *    {@link StoreConflictError} naming the stream, the expected seq and the seq it got, and
 *    nothing of the batch is written, not even its other streams' runes. PostgreSQL checks it with
 *    `UPDATE streams SET seq = seq + n WHERE stream = $1 AND seq = $expected` (0 rows: another
 *    writer got there first). The engine appends the batch's other streams again, brings the
 *    stream up to the store's head (folding and publishing the runes it missed) and applies the
 *    losing events again to that newer state, each then accepted or rejected as the machine says
 *    (`maxRaceLosses` losses in a row: `contention`). Any other error fails the whole batch.
 * 2. **Other writers' runes.** A store several writers share has {@link tail}: every rune it
 *    commits, from any writer, reaches each listener in commit order, with its position and its
 *    writer. An engine created with `followStore` folds the other writers' runes into its
 *    instances and publishes them, so its `state$` and `runes$` carry them live. A store that keeps
 *    positions durably (PostgreSQL) may also let a listener resume after a position it saw (an
 *    `afterPosition` option); the memory store keeps no history, and an engine never needs one:
 *    what it missed, it hydrates from the store.
 * 3. **Fencing.** An append may carry its writer's {@link Fence}s. A store that fences has
 *    {@link raiseFence}, which a new owner calls when it takes the lease, before it writes; from
 *    then on every append with an older epoch of that lease among its fences is refused, whole, with
 *    a {@link StoreFencedError} naming the first such fence (an append with a newer epoch raises it
 *    too). A store without
 *    `raiseFence` has one writer by construction (the SQLite file lock) and ignores fences.
 */
export interface RuneStore {
  /**
   * Commits a batch atomically. Rejects with {@link StoreConflictError} when a seq does not continue
   * its stream, with {@link StoreFencedError} when its fence is older than the lease's newest.
   */
  append(runes: readonly Rune[], options?: AppendOptions): Promise<void>;
  /**
   * Commits one rune at once, for a store with nothing to wait for (the memory store): same checks
   * and errors as `append`, thrown. A store that has it is written to as each dispatch is accepted,
   * so a dispatch costs no batching turn; a store that does I/O leaves it out and gets batches.
   */
  appendSync?(rune: Rune, options?: AppendOptions): void;
  /** The stream's machine and last seq, or `undefined` for a stream never spawned. */
  head(stream: string): Promise<StreamHead | undefined>;
  /**
   * Lists the heads of the streams the query matches, in stream id order, a page at a time:
   * what an engine reads at start to resume the effects its streams need (timers, interrupted
   * tool calls). The store may be written to while the listing is consumed.
   */
  heads(query?: HeadsQuery): AsyncIterable<StreamHead>;
  /**
   * The stream's runes with `seq > afterSeq`, in seq order, at most `limit` of them. Fewer than
   * `limit` only when no more are stored: a reader pages on until a short page, and stops there
   * without asking again.
   */
  read(stream: string, afterSeq?: number, limit?: number): Promise<Rune[]>;
  /**
   * The events of the same runes, and nothing else: all that hydration folds. The first is the
   * event of seq `afterSeq + 1` (seqs have no gaps). Cheaper than `read`: no rune objects. A short
   * page, as `read`'s, only at the stream's end.
   */
  readEvents(stream: string, afterSeq?: number, limit?: number): Promise<Rune['event'][]>;
  /** The stream's newest snapshot, if any. */
  latestSnapshot(stream: string): Promise<Snapshot | undefined>;
  /** Stores a snapshot (replacing any older one of the stream). Its runes must already be durable. */
  saveSnapshot(snapshot: Snapshot): Promise<void>;
  /**
   * Deletes the stream's runes with `seq <= throughSeq` (retention). Only runes a snapshot covers
   * may go: the store refuses to prune past the newest snapshot. Resolves to the number deleted.
   */
  prune(stream: string, throughSeq: number): Promise<number>;
  /**
   * Optional, for a store that can take back pruned runes (from their archive): puts `runes`, the
   * consecutive runes of one stream that end right below its oldest stored rune (at its head when
   * none is left), back in the log, all in one transaction. The head, the snapshot and the runes
   * after them stay as they are. Refuses anything else with a {@link StoreError} `invalid_restore`
   * and writes nothing. Resolves to the number restored.
   */
  restore?(runes: readonly Rune[]): Promise<number>;
  /**
   * Optional, for a store several writers share: calls `listener` with every rune committed from
   * now on, by any writer (the caller's own included), in commit order, each once; never a rune of
   * a refused batch. Returns the function that stops it. Closing the store stops every listener.
   */
  tail?(listener: TailListener): () => void;
  /**
   * Optional, for a store that fences: records `fence.epoch` as the newest epoch of `fence.lease`
   * (a lower one than the newest is ignored). Every later append that carries an older epoch of
   * that lease is refused with a {@link StoreFencedError}.
   */
  raiseFence?(fence: Fence): Promise<void>;
  /** Flushes and releases the store. Further calls reject. */
  close(): Promise<void>;
}

/**
 * Stable codes of store errors, safe to branch on:
 * - `seq_conflict`: a rune does not continue its stream (another writer got there first, or a bug).
 * - `fenced`: the append's fence is older than the newest epoch of its lease: the writer lost its lease.
 * - `unknown_stream`, `prune_past_snapshot`: a snapshot or prune the stream cannot take.
 * - `invalid_restore`: runes to restore that are not the pruned runes right below the stream's oldest stored one.
 * - `closed`: the store is closed.
 * - `invalid_file`: the file is not a runestream file this code reads (checked at open).
 * - `locked`: another process has the file open for writing (checked at open: one writer process per file).
 * - `disk_full`: the disk (or the file's size limit) is full.
 * - `read_only`: the file, or its directory, cannot be written.
 * - `io_error`: the operating system failed to read or write the file; or the
 *   database (PostgreSQL) failed the operation.
 * - `invalid_database`: the PostgreSQL schema is not one this code reads: it holds another
 *   application's tables, or a newer schema version (checked at open, before anything is written).
 * - `unavailable`: the connection to the database was lost or refused. A write that fails so may
 *   have been committed just before, or not at all (all or nothing, either way): read to know.
 * - `batch_too_large`: an append carries more runes than the store takes at once (its `maxBatchRunes`).
 * - `invalid_rune`: a rune holds a value the database cannot store (PostgreSQL's jsonb takes no NUL
 *   character, `\u0000`, in a string); nothing of the batch was written.
 * - `corrupt_wal`: the file's write-ahead log is damaged so that opening it would silently drop
 *   committed transactions (checked at open, before SQLite recovers it; the message says which frame).
 * - `corrupt_file`: SQLite's page check of the file (`quick_check`) failed at open (the message
 *   quotes its first findings), or a read or write met a page SQLite found damaged.
 * - `chain_broken`: a stored rune does not match its hash chain (its bytes changed after it was
 *   written): the read of its stream is refused, naming the stream and the seq; other streams are read as before.
 */
export type StoreErrorCode =
  | 'seq_conflict'
  | 'fenced'
  | 'unknown_stream'
  | 'prune_past_snapshot'
  | 'invalid_restore'
  | 'closed'
  | 'invalid_file'
  | 'locked'
  | 'disk_full'
  | 'read_only'
  | 'io_error'
  | 'invalid_database'
  | 'unavailable'
  | 'batch_too_large'
  | 'invalid_rune'
  | 'corrupt_wal'
  | 'corrupt_file'
  | 'chain_broken';

/** A store refused or failed an operation; nothing of a failed write was written. */
export class StoreError extends Error {
  override readonly name: string = 'StoreError';
  constructor(
    readonly code: StoreErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * A batch whose seq does not continue its stream: another writer appended first, or a bug. The
 * whole batch was refused and nothing of it written. `stream` is the first stream of the batch
 * found not to continue, `expectedSeq` the seq its next rune must have (its head + 1, counting the
 * batch's runes before it), `gotSeq` the seq the batch had there.
 */
export class StoreConflictError extends StoreError {
  override readonly name = 'StoreConflictError';
  constructor(
    readonly stream: string,
    readonly expectedSeq: number,
    readonly gotSeq: number,
  ) {
    super('seq_conflict', `stream "${stream}": expected seq ${expectedSeq}, got ${gotSeq}; nothing of the batch was written`);
  }
}

/**
 * An append whose fence is older than the newest epoch the store has seen of its lease: the writer
 * lost its lease. The whole batch was refused and nothing of it written.
 */
export class StoreFencedError extends StoreError {
  override readonly name = 'StoreFencedError';
  constructor(
    readonly fence: Fence,
    readonly newestEpoch: number,
  ) {
    super('fenced', `lease "${fence.lease}": epoch ${fence.epoch} is fenced off by epoch ${newestEpoch}; nothing of the batch was written`);
  }
}

/**
 * A store's open/closed state, shared by every store: `open()` throws a {@link StoreError} `closed`
 * once `close()` was called; `close()` says whether this call is the one that closed it.
 */
export function openState(): { open(): void; close(): boolean } {
  let closed = false;
  return {
    open() {
      if (closed) throw new StoreError('closed', 'the store is closed');
    },
    close() {
      const first = !closed;
      closed = true;
      return first;
    },
  };
}

/** The error of a prune that would drop runes no snapshot covers. */
export const prunePastSnapshot = (stream: string, throughSeq: number, covered: number): StoreError =>
  new StoreError('prune_past_snapshot', `stream "${stream}": cannot prune through seq ${throughSeq}, the newest snapshot covers ${covered}`);

/**
 * Checks runes to restore into a stream whose head is `head` and whose oldest stored rune is
 * `oldest` (`head + 1` when none is left): one stream's consecutive runes of its machine, ending
 * at `oldest - 1`. Shared by every store, so all of them refuse the same restores.
 */
export function checkRestore(runes: readonly Rune[], head: StreamHead | undefined, oldest: number): void {
  const first = runes[0];
  if (first === undefined) return;
  const refuse = (why: string): never => {
    throw new StoreError('invalid_restore', `stream "${first.stream}": cannot restore runes ${first.seq}..${runes[runes.length - 1]!.seq}: ${why}; nothing was written`);
  };
  if (head === undefined) refuse('the stream does not exist');
  runes.forEach((rune, i) => {
    if (rune.stream !== first.stream) refuse(`a rune of another stream ("${rune.stream}") is among them`);
    if (rune.machine !== head!.machine) refuse(`rune ${rune.seq} is of machine "${rune.machine}", the stream's is "${head!.machine}"`);
    if (rune.seq !== first.seq + i) refuse(`they are not consecutive (seq ${rune.seq} at position ${i})`);
  });
  if (first.seq < 1 || first.seq + runes.length !== oldest) refuse(`they must end right below the oldest stored rune, seq ${oldest}`);
}

/** A head as a SQL store's row holds it: no state name is `null`. */
export interface StreamHeadRow {
  stream: string;
  machine: string;
  seq: number;
  value: string | null;
  at: number;
}

/** The head a row holds, without a `value` key when it has none (as every store gives it). */
export const headFromRow = ({ stream, machine, seq, value, at }: StreamHeadRow): StreamHead =>
  value === null ? { stream, machine, seq, at } : { stream, machine, seq, value, at };

/** Whether a head matches a query. */
export const headMatches = (head: StreamHead, query: HeadsQuery): boolean =>
  (query.machine === undefined || head.machine === query.machine) &&
  (query.values === undefined || (head.value !== undefined && query.values.includes(head.value))) &&
  (query.prefix === undefined || head.stream.startsWith(query.prefix));

/**
 * Checks that a batch continues each stream's head without gap; returns the batch's last seq per
 * stream. `headOf` gives the current last seq (0 for a new stream). Shared by every store, so all
 * of them refuse exactly the same batches.
 */
export function checkBatch(runes: readonly Rune[], headOf: (stream: string) => number): Map<string, number> {
  const next = new Map<string, number>();
  // A stream's runes usually come in a run: only the first of a run is looked up.
  let stream: string | undefined;
  let last = 0;
  for (const rune of runes) {
    if (rune.stream !== stream) {
      if (stream !== undefined) next.set(stream, last);
      stream = rune.stream;
      last = next.get(stream) ?? headOf(stream);
    }
    if (rune.seq !== last + 1) throw new StoreConflictError(rune.stream, last + 1, rune.seq);
    last = rune.seq;
  }
  if (stream !== undefined) next.set(stream, last);
  return next;
}
