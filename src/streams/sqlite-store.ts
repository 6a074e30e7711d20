import Database from 'better-sqlite3';
import { storeErrorOf } from './sqlite-errors.js';
import { checkFile, createIfAbsent } from './sqlite-file.js';
import { upgrade, WAL_CHECKPOINT_PAGES } from './sqlite-schema.js';
import { openStore } from './sqlite-statements.js';
import { StoreError, type RuneStore } from './store.js';
import { threadedSqliteStore } from './sqlite-thread/client.js';

export { SQLITE_APPLICATION_ID, SQLITE_SCHEMA_VERSION, WAL_CHECKPOINT_PAGES } from './sqlite-schema.js';

/** Options of {@link sqliteStore}. Each is checked when the store opens. */
export interface SqliteStoreOptions {
  /**
   * When a committed batch is on disk: SQLite's `PRAGMA synchronous`, in WAL mode. Default: `'normal'`.
   * - `'normal'`: a commit is written to the WAL without an fsync (the WAL is fsynced at each
   *   checkpoint). A batch whose `append` resolved survives a crash of the process (kill -9, an OOM
   *   kill), since the OS holds the write; a power loss or an OS crash may lose the last batches
   *   committed before it. The file stays consistent either way.
   * - `'full'`: the WAL is also fsynced at every commit, so a batch whose `append` resolved survives
   *   a power loss too. Each `append` then waits for one fsync.
   */
  readonly synchronous?: 'normal' | 'full';
  /**
   * How long opening waits for another connection to let go of the file (a server on it that is
   * still shutting down) before it refuses with a {@link StoreError} `locked`. Default: 1000 ms.
   * Once open, the store holds the file's lock until `close()`: no later operation waits for one.
   */
  readonly busyTimeoutMs?: number;
  /**
   * What opening an existing file checks of its pages, before anything is written to it:
   * - `'quick'` (the default): SQLite's `PRAGMA quick_check`, every page of every b-tree (cell
   *   pointers, record formats, page links, free list) without comparing indexes to their tables.
   *   Measured about 1.0-1.3 s for a 294 MB file of 1,000,000 runes (warm cache): roughly 4 ms per
   *   MB at each start. A file that fails is refused with a {@link StoreError} `'corrupt_file'`
   *   whose message gives SQLite's first findings (damaged pages would otherwise be served, or fail
   *   later, one stream at a time).
   * - `'off'`: no page check (a very large file that must open at once); the header, schema and
   *   WAL checks still run, and each rune's hash chain is still checked as it is read.
   */
  readonly integrityCheck?: 'quick' | 'off';
  /**
   * Whether each rune is stored with its hash chain (a hash of the previous rune's hash and the
   * rune's stored text; see `rune-chain.ts`) and every read checks it. Default: `true`. A read that
   * meets a rune whose bytes changed after it was written refuses the stream with a
   * {@link StoreError} `'chain_broken'` naming the stream and the seq; other streams are served as
   * before. `false` writes runes without a hash and checks none (what the benchmark compares with).
   */
  readonly hashChain?: boolean;
  /**
   * Whether the file is written and read from a thread of its own (a worker thread that holds the
   * SQLite connection) rather than from this one. Default: `false`. With `true`, SQLite's work (a
   * commit, which is most of a streaming session's cost on this store; reads; the runes' JSON) runs
   * beside the event loop instead of in it, on a second core; each call crosses to the thread and
   * back, its runes copied (structured clone). Opening still blocks until the file is open, and
   * refuses as the in-thread store does. For a process that serves many sessions: `runestream
   * serve` uses it.
   */
  readonly thread?: boolean;
}

/**
 * A store in one SQLite file (better-sqlite3, WAL mode): the embedded default. Runes survive a
 * restart; a stream can be dispatched to again once its file is reopened.
 *
 * 1. Opening creates the file and its schema when `path` does not exist (built aside and linked
 *    in: a crash may leave a `*.creating` file beside it, never half a file at `path`), or checks that the existing file is a runestream file of a schema
 *    version this code reads. Anything else (an empty, corrupt or truncated file, another
 *    application's SQLite database, a newer schema) throws a {@link StoreError} with code
 *    `'invalid_file'` naming the path and the problem, before anything is written to the file.
 *    A file whose write-ahead log (`<path>-wal`, left by a crash) is damaged so that SQLite's
 *    recovery would silently drop committed transactions (a flipped bit in a frame with intact
 *    commits after it) is refused with code `'corrupt_wal'`, naming the frame, before SQLite opens it.
 *    Its pages are then checked (`options.integrityCheck`, SQLite's `quick_check` by default): a
 *    file with damaged pages is refused with code `'corrupt_file'`.
 *    A file of an older schema version (1: runes without a `payload` column) is upgraded in place,
 *    once it passed those checks and its lock is held, in one transaction.
 * 2. `append` commits the whole batch in one `BEGIN IMMEDIATE` transaction and resolves after the
 *    commit. The heads are read inside that transaction and checked with `checkBatch`, so it refuses
 *    exactly what every store refuses, and nothing of a refused batch is written.
 * 3. The database keeps each stream gapless on its own: triggers refuse a rune that does not
 *    continue its stream, a head moved anywhere but to its last rune, runes updated, and runes
 *    deleted other than the oldest ones a snapshot covers. A writer that bypasses this code (SQL
 *    from another process, a bug) cannot leave a gap or a duplicate.
 * 4. `options.synchronous` says when a commit is on disk: see {@link SqliteStoreOptions}.
 * 5. One process writes a file: the store takes SQLite's exclusive lock at open and keeps it until
 *    `close()`, so a second store on the file, in this process or another, is refused at open with
 *    code `'locked'` (after waiting up to `busyTimeoutMs` for the holder to let go), and so is any
 *    other SQLite connection reading or writing it meanwhile. The operating system drops the lock
 *    when the process dies, kill -9 included: a crash leaves no stale lock. Several processes
 *    sharing one log is the PostgreSQL store's job. So it has no `tail` (no other writer's runes
 *    to hear) and no `raiseFence`: the lock is its fence, and the `fences` and `writer` of an
 *    append's options are ignored.
 * 6. `close()` checkpoints the WAL into the file and closes it; every call after it rejects with
 *    code `'closed'`.
 *
 * Opening is synchronous (better-sqlite3 is), so the store can go straight into `createEngine`.
 *
 * ## Example
 * ```ts
 * import { mkdtempSync, rmSync } from 'node:fs';
 * import { tmpdir } from 'node:os';
 * import { join } from 'node:path';
 * import type { StoreError } from 'runestream';
 * import { sqliteStore } from 'runestream/sqlite';
 *
 * const dir = mkdtempSync(join(tmpdir(), 'runestream-'));
 * const store = sqliteStore(join(dir, 'agents.db'));
 * await store.append([
 *   { stream: 'chat-1', seq: 1, machine: 'chat-actor', kind: 'spawned', event: { type: 'spawn' }, to: 'idle', at: 0 },
 *   { stream: 'chat-1', seq: 2, machine: 'chat-actor', kind: 'Ping', event: { type: 'Ping' }, from: 'idle', to: 'idle', at: 5 },
 * ]);
 * await store.close();
 *
 * const again = sqliteStore(join(dir, 'agents.db'));
 * console.log(await again.head('chat-1'));
 * // Logs: { stream: 'chat-1', machine: 'chat-actor', seq: 2, value: 'idle', at: 5 }
 * await again.append([{ stream: 'chat-1', seq: 2, machine: 'chat-actor', kind: 'Ping', event: { type: 'Ping' }, at: 9 }])
 *   .catch((error: StoreError) => console.log(error.code, error.message));
 * // Logs: seq_conflict stream "chat-1": expected seq 3, got 2; nothing of the batch was written
 * await again.close();
 * rmSync(dir, { recursive: true });
 * ```
 * With the engine: `createEngine({ store: sqliteStore('agents.db') })`.
 *
 * A rune is stored by the fields of the {@link Rune} schema (other own properties are not kept),
 * as JSON: `-0` reads back as `0`, and `undefined` properties inside `event` are dropped.
 *
 * @see memoryStore for a store in memory, with the same contract.
 */
export function sqliteStore(path: string, options: SqliteStoreOptions = {}): RuneStore {
  const { synchronous, busyTimeoutMs, integrityCheck, hashChain, thread } = checkOptions(path, options);
  if (thread) return threadedSqliteStore(path, { synchronous, busyTimeoutMs, integrityCheck, hashChain });
  createIfAbsent(path);
  checkFile(path, busyTimeoutMs, integrityCheck);

  const db = new Database(path, { fileMustExist: true, timeout: busyTimeoutMs });
  try {
    // Set before the first access of the WAL: SQLite then keeps the file locked, with no shared
    // memory for other connections, until this one closes. Two writer processes on one file would
    // fail each other's batches and see runes they did not write.
    db.pragma('locking_mode = EXCLUSIVE');
    const mode = db.pragma('journal_mode = WAL', { simple: true });
    if (mode !== 'wal') throw new StoreError('invalid_file', `cannot open "${path}": SQLite cannot use WAL mode there (journal_mode stays "${String(mode)}")`);
    db.pragma(`synchronous = ${synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    db.pragma(`wal_autocheckpoint = ${WAL_CHECKPOINT_PAGES}`);
    db.exec('BEGIN IMMEDIATE; COMMIT'); // takes the lock now, rather than at the first append
    upgrade(db);
    return openStore(db, path, hashChain);
  } catch (error) {
    db.close();
    throw storeErrorOf(path, error);
  }
}

/** Merges the defaults into the options and checks them, ws style: each error names its option. */
function checkOptions(path: unknown, options: unknown): Required<SqliteStoreOptions> {
  if (typeof path !== 'string' || path === '') {
    throw new TypeError(`sqliteStore: the path must be a non-empty string (a file path), got ${shown(path)}`);
  }
  if (path === ':memory:') throw new TypeError('sqliteStore: ":memory:" is not a file; use memoryStore() for a store in memory');
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new TypeError(`sqliteStore: the options must be an object, got ${shown(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_NAMES.includes(key)) {
      throw new TypeError(
        `sqliteStore: unknown option "${key}"; the options are ${OPTION_NAMES.slice(0, -1)
          .map((name) => `"${name}"`)
          .join(', ')} and "${OPTION_NAMES.at(-1)}"`,
      );
    }
  }
  const { synchronous = 'normal', busyTimeoutMs = 1000, integrityCheck = 'quick', hashChain = true, thread = false } = options as SqliteStoreOptions;
  if (typeof hashChain !== 'boolean') throw new TypeError(`sqliteStore: the "hashChain" option must be a boolean, got ${shown(hashChain)}`);
  if (typeof thread !== 'boolean') throw new TypeError(`sqliteStore: the "thread" option must be a boolean, got ${shown(thread)}`);
  if (integrityCheck !== 'quick' && integrityCheck !== 'off') {
    throw new TypeError(`sqliteStore: the "integrityCheck" option must be 'quick' or 'off', got ${shown(integrityCheck)}`);
  }
  if (synchronous !== 'normal' && synchronous !== 'full') {
    throw new TypeError(`sqliteStore: the "synchronous" option must be 'normal' or 'full', got ${shown(synchronous)}`);
  }
  if (!Number.isInteger(busyTimeoutMs) || busyTimeoutMs < 0) {
    throw new TypeError(`sqliteStore: the "busyTimeoutMs" option must be a non-negative integer (milliseconds), got ${shown(busyTimeoutMs)}`);
  }
  return { synchronous, busyTimeoutMs, integrityCheck, hashChain, thread };
}

const OPTION_NAMES: readonly string[] = ['synchronous', 'busyTimeoutMs', 'integrityCheck', 'hashChain', 'thread'];

const shown = (value: unknown): string => (typeof value === 'string' ? JSON.stringify(value) : String(value));
