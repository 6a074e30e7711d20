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
}

/** A state folded from a stream's runes `1..seq`: hydration starts here and folds the rest. */
export interface Snapshot<S = unknown> {
  readonly stream: string;
  readonly seq: number;
  readonly state: S;
}

/**
 * Where runes live. The engine is the only writer of its streams within a process; the store is
 * what makes the log durable and keeps it honest.
 *
 * `append` is the one write path and it is all-or-nothing: a batch of runes of any streams is
 * committed in one transaction, or not at all. The store itself enforces each stream's gapless
 * seq: a stream's runes in a batch must continue its head without gap (`seq` 1 is the spawn, which
 * creates the stream and records its machine), or the whole batch is refused with a
 * {@link StoreConflictError}. An accepted dispatch is acknowledged only after its batch's `append`
 * resolved.
 *
 * Several writer processes (a PostgreSQL store behind several servers) fit the same contract: the
 * expected seq of every stream in a batch is `first rune's seq - 1`, so the store checks it the
 * way PostgreSQL does with `UPDATE streams SET seq = seq + n WHERE stream = $1 AND seq = $expected`
 * (0 rows: another writer got there first). The engine then fails that stream's dispatches and
 * drops it from memory, so its next dispatch folds the other writer's runes first, and appends the
 * batch's other streams again. (Re-applying the refused events to that newer state, instead of
 * failing them, is for the PostgreSQL store.) A store that refuses for one stream says which with a
 * {@link StoreConflictError}; any other error fails the whole batch.
 */
export interface RuneStore {
  /** Commits a batch atomically. Rejects with {@link StoreConflictError} when a seq does not continue its stream. */
  append(runes: readonly Rune[]): Promise<void>;
  /**
   * Commits one rune at once, for a store with nothing to wait for (the memory store): same checks
   * and errors as `append`, thrown. A store that has it is written to as each dispatch is accepted,
   * so a dispatch costs no batching turn; a store that does I/O leaves it out and gets batches.
   */
  appendSync?(rune: Rune): void;
  /** The stream's machine and last seq, or `undefined` for a stream never spawned. */
  head(stream: string): Promise<StreamHead | undefined>;
  /**
   * Lists the heads of the streams the query matches, in stream id order, a page at a time:
   * what an engine reads at start to resume the effects its streams need (timers, interrupted
   * tool calls). The store may be written to while the listing is consumed.
   */
  heads(query?: HeadsQuery): AsyncIterable<StreamHead>;
  /** The stream's runes with `seq > afterSeq`, in seq order, at most `limit` of them. */
  read(stream: string, afterSeq?: number, limit?: number): Promise<Rune[]>;
  /**
   * The events of the same runes, and nothing else: all that hydration folds. The first is the
   * event of seq `afterSeq + 1` (seqs have no gaps). Cheaper than `read`: no rune objects.
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
  /** Flushes and releases the store. Further calls reject. */
  close(): Promise<void>;
}

/**
 * Stable codes of store errors, safe to branch on:
 * - `seq_conflict`: a rune does not continue its stream (another writer got there first, or a bug).
 * - `unknown_stream`, `prune_past_snapshot`: a snapshot or prune the stream cannot take.
 * - `closed`: the store is closed.
 * - `invalid_file`: the file is not a runestream file this code reads (checked at open).
 * - `locked`: another process has the file open for writing (checked at open: one writer process per file).
 * - `disk_full`: the disk (or the file's size limit) is full.
 * - `read_only`: the file, or its directory, cannot be written.
 * - `io_error`: the operating system failed to read or write the file, or found it corrupt.
 */
export type StoreErrorCode =
  | 'seq_conflict'
  | 'unknown_stream'
  | 'prune_past_snapshot'
  | 'closed'
  | 'invalid_file'
  | 'locked'
  | 'disk_full'
  | 'read_only'
  | 'io_error';

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

/** A batch whose seq does not continue its stream: another writer appended first, or a bug. */
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

/** Whether a head matches a query. */
export const headMatches = (head: StreamHead, query: HeadsQuery): boolean =>
  (query.machine === undefined || head.machine === query.machine) &&
  (query.values === undefined || (head.value !== undefined && query.values.includes(head.value)));

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
