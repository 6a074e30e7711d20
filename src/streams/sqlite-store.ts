import { randomBytes } from 'node:crypto';
import { closeSync, constants, copyFileSync, linkSync, openSync, readSync, rmSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';
import type { Rune } from '../reducers/rune.js';
import { isLockedError, storeErrorOf } from './sqlite-errors.js';
import { walDamage } from './sqlite-wal.js';
import { CHAIN_START, chainHash } from './rune-chain.js';
import {
  StoreError,
  checkBatch,
  checkRestore,
  headFromRow,
  headMatches,
  prunePastSnapshot,
  openState,
  type RuneStore,
  type Snapshot,
  type StreamHead,
  type StreamHeadRow,
} from './store.js';
import { errorText } from '../reducers/error-text.js';
import { threadedSqliteStore } from './sqlite-thread/client.js';

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

/** `PRAGMA application_id` of every runestream file: "RUNE" in ASCII. */
export const SQLITE_APPLICATION_ID = 0x52_55_4e_45;
/**
 * `PRAGMA user_version` of the schema this version writes and reads. Version 1 (no `runes.payload`),
 * version 2 (pruned runes cannot be restored) and version 3 (no hash chain) are upgraded in place
 * when opened (see {@link sqliteStore}).
 */
export const SQLITE_SCHEMA_VERSION = 4;

/**
 * The WAL is copied into the file once it holds this many pages (4 KB each: about 40 MB), where
 * SQLite's default is 1,000. Many sessions' runes each dirty their stream's page, so a commit writes
 * dozens of pages; a checkpoint syncs both files and copies each page once however often the WAL
 * rewrote it. At 400 streaming sessions the default spent about a third of the store's time in checkpoints.
 */
export const WAL_CHECKPOINT_PAGES = 10_000;

/** The oldest schema version this code opens, upgrading it. */
const OLDEST_SCHEMA_VERSION = 1;

/**
 * A rune continues its stream: its seq is 1 + the stream's last rune, or 1 + its head when all its
 * runes were pruned (or it has none yet). The other triggers keep the last rune >= the head (the
 * head moves only to the last rune; only the oldest runes are deleted), so a batch's runes may go
 * in before it advances the head, and a stream never created has neither: NULL, refused. Or, a
 * pruned rune restored from its archive: 1 below the oldest stored rune (the head when none is
 * left), so restored runes go in newest first and the stream stays gapless (schema version 3).
 */
const RUNES_GAPLESS = `
CREATE TRIGGER runes_gapless BEFORE INSERT ON runes BEGIN
  SELECT RAISE(ABORT, 'runestream: a rune must continue its stream without gap (seq = last seq + 1)')
  WHERE NEW.seq IS NOT 1 + coalesce(
    (SELECT max(seq) FROM runes WHERE stream = NEW.stream),
    (SELECT seq FROM streams WHERE stream = NEW.stream))
  AND NOT (NEW.seq >= 1 AND NEW.seq IS coalesce(
    (SELECT min(seq) FROM runes WHERE stream = NEW.stream),
    1 + (SELECT seq FROM streams WHERE stream = NEW.stream)) - 1);
END;`;

/** What turns each older schema version into the next one, by the version it upgrades from. */
const UPGRADES: Readonly<Record<number, string>> = {
  1: 'ALTER TABLE runes ADD COLUMN payload TEXT;',
  2: `DROP TRIGGER runes_gapless; ${RUNES_GAPLESS}`,
  // The runes already stored keep no hash: each stream's chain starts at its first rune written after.
  3: 'ALTER TABLE runes ADD COLUMN hash INTEGER; ALTER TABLE streams ADD COLUMN hash INTEGER;',
};

/**
 * The schema. `runes.body` is the rune's JSON without the fields the row already has: `stream`,
 * `seq` and `kind` are columns, and `machine` is kept only when it differs from its stream's.
 * `runes.payload` is the rune's payload as JSON, NULL when it has none (schema version 2).
 * The triggers make the database itself keep each stream gapless, whoever writes to it.
 */
const SCHEMA = `
CREATE TABLE streams (
  stream  TEXT    NOT NULL PRIMARY KEY,
  machine TEXT    NOT NULL,
  seq     INTEGER NOT NULL CHECK (seq >= 0), -- the last seq: the stream's head
  value   TEXT,                              -- the state name after the last rune
  at      REAL    NOT NULL DEFAULT 0,        -- the last rune's time
  hash    INTEGER                            -- the last rune's chain hash (schema version 4)
) STRICT, WITHOUT ROWID;

-- Resuming effects at start lists streams by machine and state (idle chat actors, executing tool calls).
CREATE INDEX streams_by_state ON streams (machine, value, stream);

CREATE TABLE runes (
  stream TEXT    NOT NULL,
  seq    INTEGER NOT NULL,
  kind   TEXT    NOT NULL,
  body   TEXT    NOT NULL, -- JSON: { machine?, event, from?, to?, at }
  payload TEXT,            -- JSON: the rune's payload; NULL when it has none
  hash   INTEGER,          -- chain hash of the previous rune's hash and this rune's kind, body, payload; NULL: none (see rune-chain.ts)
  PRIMARY KEY (stream, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE snapshots (
  stream TEXT    NOT NULL PRIMARY KEY,
  seq    INTEGER NOT NULL,
  state  TEXT    NOT NULL -- JSON
) STRICT;

${RUNES_GAPLESS}

CREATE TRIGGER runes_immutable BEFORE UPDATE ON runes BEGIN
  SELECT RAISE(ABORT, 'runestream: runes are immutable');
END;

-- Pruning deletes a stream's oldest runes, and only those its snapshot covers.
CREATE TRIGGER runes_prune BEFORE DELETE ON runes BEGIN
  SELECT RAISE(ABORT, 'runestream: only a stream''s oldest runes, covered by its snapshot, may be deleted')
  WHERE OLD.seq > coalesce((SELECT seq FROM snapshots WHERE stream = OLD.stream), 0)
     OR EXISTS (SELECT 1 FROM runes WHERE stream = OLD.stream AND seq < OLD.seq);
END;

CREATE TRIGGER streams_start BEFORE INSERT ON streams BEGIN
  SELECT RAISE(ABORT, 'runestream: a stream is created once, at seq 0 (its spawn rune is seq 1)')
  WHERE NEW.seq <> 0 OR EXISTS (SELECT 1 FROM streams WHERE stream = NEW.stream);
END;

CREATE TRIGGER streams_head BEFORE UPDATE ON streams BEGIN
  SELECT RAISE(ABORT, 'runestream: a stream keeps its id and machine')
  WHERE NEW.stream IS NOT OLD.stream OR NEW.machine IS NOT OLD.machine;
  SELECT RAISE(ABORT, 'runestream: a stream''s head only moves forward, to its last rune')
  WHERE NEW.seq <> OLD.seq
    AND (NEW.seq < OLD.seq OR NEW.seq IS NOT (SELECT max(seq) FROM runes WHERE stream = NEW.stream));
END;

CREATE TRIGGER streams_kept BEFORE DELETE ON streams BEGIN
  SELECT RAISE(ABORT, 'runestream: streams are never deleted');
END;

-- A snapshot covers runes that exist, and never moves back: pruned runes stay covered.
CREATE TRIGGER snapshots_insert BEFORE INSERT ON snapshots BEGIN
  SELECT RAISE(ABORT, 'runestream: a snapshot must cover existing runes of its stream, and be newer than the one it replaces')
  WHERE NOT EXISTS (SELECT 1 FROM streams WHERE stream = NEW.stream AND seq >= NEW.seq)
     OR NEW.seq < (SELECT seq FROM snapshots WHERE stream = NEW.stream);
END;

CREATE TRIGGER snapshots_update BEFORE UPDATE ON snapshots BEGIN
  SELECT RAISE(ABORT, 'runestream: a snapshot must cover existing runes of its stream, and be newer than the one it replaces')
  WHERE NEW.stream IS NOT OLD.stream OR NEW.seq < OLD.seq
     OR NOT EXISTS (SELECT 1 FROM streams WHERE stream = NEW.stream AND seq >= NEW.seq);
END;

CREATE TRIGGER snapshots_kept BEFORE DELETE ON snapshots BEGIN
  SELECT RAISE(ABORT, 'runestream: snapshots are replaced, never deleted');
END;
`;

/** What a runestream file must hold, checked at open before anything is written. */
const SCHEMA_OBJECTS: ReadonlyArray<readonly ['table' | 'trigger', string]> = [
  ['table', 'streams'],
  ['table', 'runes'],
  ['table', 'snapshots'],
  ...[...SCHEMA.matchAll(/CREATE TRIGGER (\w+)/g)].map((m) => ['trigger', m[1]!] as const),
];

const SQLITE_MAGIC = Buffer.from('SQLite format 3\0', 'latin1');
const SQLITE_HEADER_BYTES = 100;

/** A rune's `body` column, parsed. */
type RuneBody = Omit<Rune, 'stream' | 'seq' | 'kind' | 'machine'> & { machine?: string };

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

/**
 * Creates a runestream file at `path` unless something is there. The file is built under a
 * temporary name and then linked into place, which fails if `path` appeared meanwhile (another
 * process opening the same path first): `path` never holds a half-created file.
 */
function createIfAbsent(path: string): void {
  try {
    statSync(path);
    return;
  } catch (error) {
    if (errorCode(error) !== 'ENOENT') throw error;
  }
  const temporary = `${path}.${process.pid}-${randomBytes(6).toString('hex')}.creating`;
  try {
    let db: Database.Database;
    try {
      db = new Database(temporary);
    } catch (error) {
      throw new Error(`sqliteStore: cannot create "${path}": ${errorText(error)}`, { cause: error });
    }
    try {
      db.pragma('journal_mode = WAL');
      db.exec(`BEGIN; PRAGMA application_id = ${SQLITE_APPLICATION_ID}; PRAGMA user_version = ${SQLITE_SCHEMA_VERSION}; ${SCHEMA} COMMIT;`);
    } finally {
      db.close(); // checkpoints: the whole file is in `temporary`, its WAL gone
    }
    try {
      linkSync(temporary, path);
    } catch (error) {
      if (errorCode(error) === 'EEXIST') return;
      // A file system without hard links: an exclusive copy still never replaces a file.
      try {
        copyFileSync(temporary, path, constants.COPYFILE_EXCL);
      } catch (copyError) {
        if (errorCode(copyError) !== 'EEXIST') throw copyError;
      }
    }
  } finally {
    for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(temporary + suffix, { force: true });
  }
}

const errorCode = (error: unknown): unknown => (error as NodeJS.ErrnoException | undefined)?.code;

const invalidFile = (path: string, problem: string): StoreError => new StoreError('invalid_file', `cannot open "${path}": ${problem}; the file was left untouched`);

const hex = (n: number): string => `0x${(n >>> 0).toString(16).padStart(8, '0')}`;

/**
 * Checks that `path` is a runestream file this code reads, without writing to it. The SQLite
 * header is read as bytes first, so a foreign or corrupt file is refused before SQLite opens it
 * (no `-wal` / `-shm` appear next to it). A file that passes is then opened read-only to check
 * what the header cannot show: the schema, and the pragmas as the WAL has them. A file another
 * process holds is refused as `locked`, after waiting up to `busyTimeoutMs` for it.
 */
function checkFile(path: string, busyTimeoutMs: number, integrityCheck: 'quick' | 'off'): void {
  const stats = statSync(path);
  if (!stats.isFile()) throw invalidFile(path, 'it is not a file');
  if (stats.size === 0) throw invalidFile(path, 'it is empty (0 bytes); remove it, or give a path that does not exist to create a store');

  const header = Buffer.alloc(SQLITE_HEADER_BYTES);
  const fd = openSync(path, 'r');
  let length: number;
  try {
    length = readSync(fd, header, 0, SQLITE_HEADER_BYTES, 0);
  } finally {
    closeSync(fd);
  }
  const magic = Math.min(length, SQLITE_MAGIC.length);
  if (!header.subarray(0, magic).equals(SQLITE_MAGIC.subarray(0, magic))) {
    throw invalidFile(path, 'it is not an SQLite database (its first bytes are not "SQLite format 3")');
  }
  if (length < SQLITE_HEADER_BYTES) throw invalidFile(path, `its SQLite header is truncated (${length} of ${SQLITE_HEADER_BYTES} bytes)`);
  checkIds(path, header.readInt32BE(68), header.readInt32BE(60));
  checkWal(path, header.readUInt16BE(16));

  let db: Database.Database | undefined;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true, timeout: busyTimeoutMs });
    checkIds(path, Number(db.pragma('application_id', { simple: true })), Number(db.pragma('user_version', { simple: true })));
    const present = new Set(db.prepare<[], string>(`SELECT type || ' ' || name FROM sqlite_schema`).pluck().all());
    for (const [type, name] of SCHEMA_OBJECTS) {
      if (!present.has(`${type} ${name}`)) throw invalidFile(path, `its schema has no ${type} "${name}"`);
    }
    // Reads each table's root page: a file cut short fails here rather than at the first append.
    for (const table of ['streams', 'runes', 'snapshots']) db.prepare(`SELECT 1 FROM ${table} LIMIT 1`).get();
    const version = Number(db.pragma('user_version', { simple: true }));
    const columns = db.prepare<[], string>(`SELECT name FROM pragma_table_info('runes')`).pluck().all();
    if (version >= 2 && !columns.includes('payload')) throw invalidFile(path, `its schema version is ${version}, but its runes table has no "payload" column`);
    if (version >= 4 && !columns.includes('hash')) throw invalidFile(path, `its schema version is ${version}, but its runes table has no "hash" column`);
    if (integrityCheck === 'quick') checkPages(path, db);
  } catch (error) {
    if (isLockedError(error)) throw storeErrorOf(path, error);
    if (error instanceof Database.SqliteError) throw invalidFile(path, `SQLite cannot read it (${error.code}: ${error.message})`);
    throw error;
  } finally {
    db?.close();
  }
}

/**
 * Refuses a file whose WAL is damaged so that SQLite's recovery would drop committed transactions
 * without a word ({@link walDamage}): before SQLite opens it, so nothing is lost yet.
 */
function checkWal(path: string, pageSizeField: number): void {
  const wal = `${path}-wal`;
  const damage = walDamage(wal, pageSizeField === 1 ? 65_536 : pageSizeField);
  if (damage === undefined) return;
  const where = damage.frame < 0 ? 'its header' : `frame ${damage.frame + 1} (byte ${damage.offset})`;
  throw new StoreError(
    'corrupt_wal',
    `cannot open "${path}": its write-ahead log "${wal}" is damaged at ${where}, and SQLite would silently drop the ${damage.lostCommits} transaction(s) committed after it (acknowledged runes); both files were left untouched. Keep a copy of them; to open the file anyway, losing those transactions, move "${wal}" aside`,
  );
}

/** The most findings of `quick_check` a refusal quotes. */
const QUICK_CHECK_FINDINGS = 5;

/** `PRAGMA quick_check` of the open file: a file it finds corrupt is refused with `corrupt_file`, quoting its first findings. */
function checkPages(path: string, db: Database.Database): void {
  const findings = db.prepare<[], string>(`PRAGMA quick_check(${QUICK_CHECK_FINDINGS})`).pluck().all();
  if (findings.length === 1 && findings[0] === 'ok') return;
  const quoted = findings.join('; ').replace(/\n/g, '; ');
  throw new StoreError(
    'corrupt_file',
    `cannot open "${path}": SQLite's quick_check found its pages corrupt (${quoted}); the file was left untouched. Restore it from a copy, or recover what SQLite can read (sqlite3 "${path}" .recover)`,
  );
}

function checkIds(path: string, applicationId: number, version: number): void {
  if (applicationId !== SQLITE_APPLICATION_ID) {
    throw invalidFile(
      path,
      `it is an SQLite database of another application (application_id ${applicationId === 0 ? '0, none set' : hex(applicationId)}; a runestream file has ${hex(SQLITE_APPLICATION_ID)})`,
    );
  }
  if (version > SQLITE_SCHEMA_VERSION) {
    throw invalidFile(path, `it was written by a newer runestream (schema version ${version}; this one reads version ${SQLITE_SCHEMA_VERSION})`);
  }
  if (version < OLDEST_SCHEMA_VERSION) {
    throw invalidFile(path, `its runestream schema version ${version} is unknown (this one reads versions ${OLDEST_SCHEMA_VERSION} to ${SQLITE_SCHEMA_VERSION})`);
  }
}

/**
 * Brings a checked file of an older schema version to {@link SQLITE_SCHEMA_VERSION}, in one
 * transaction under the store's lock: a crash leaves it at its old version, upgraded at the next open.
 */
function upgrade(db: Database.Database): void {
  const version = Number(db.pragma('user_version', { simple: true }));
  if (version === SQLITE_SCHEMA_VERSION) return;
  const steps: string[] = [];
  for (let from = version; from < SQLITE_SCHEMA_VERSION; from++) steps.push(UPGRADES[from]!);
  db.exec(`BEGIN IMMEDIATE; ${steps.join(' ')} PRAGMA user_version = ${SQLITE_SCHEMA_VERSION}; COMMIT;`);
}

/** Heads read per page of a listing (pages, not one open cursor: better-sqlite3 cannot write while a read iterates). */
const HEADS_PAGE = 1000;
/** The first page of a listing by prefix (see `heads`). */
const FIRST_PREFIX_PAGE = 16;

/** The store over an open, checked database: every statement prepared once. */
function openStore(db: Database.Database, path: string, hashChain: boolean): RuneStore {
  const selectHead = db.prepare<[string], StreamHeadRow>('SELECT stream, machine, seq, value, at FROM streams WHERE stream = ?');
  const selectHeadHash = db.prepare<[string], { machine: string; seq: number; hash: number | null }>('SELECT machine, seq, hash FROM streams WHERE stream = ?');
  const selectHeads = db.prepare<[string, number], StreamHeadRow>('SELECT stream, machine, seq, value, at FROM streams WHERE stream > ? ORDER BY stream LIMIT ?');
  const selectHeadsOf = db.prepare<[string, string, number], StreamHeadRow>(
    'SELECT stream, machine, seq, value, at FROM streams WHERE machine = ? AND stream > ? ORDER BY stream LIMIT ?',
  );
  const insertStream = db.prepare<[string, string]>('INSERT INTO streams (stream, machine, seq) VALUES (?, ?, 0)');
  const insertRune = db.prepare<[string, number, string, string, string | null, number | null]>(
    'INSERT INTO runes (stream, seq, kind, body, payload, hash) VALUES (?, ?, ?, ?, ?, ?)',
  );
  const advanceHead = db.prepare<[number, string | null, number, number | null, string, number]>(
    'UPDATE streams SET seq = ?, value = ?, at = ?, hash = ? WHERE stream = ? AND seq = ?',
  );
  // From seq >= the one asked after: the rune before the first one returned is read too, so the
  // first one's link in the hash chain is checked as well. Raw rows (arrays), the cheapest to build.
  // The stored texts are parsed here: never SQLite's JSON functions, which refuse JSON nested
  // deeper than 1,000 levels ("malformed JSON") and so would leave such a stream unreadable for good.
  const selectRunes = db
    .prepare<[string, number, number], StoredRune>('SELECT seq, kind, body, payload, hash FROM runes WHERE stream = ? AND seq >= ? ORDER BY seq LIMIT ?')
    .raw();
  // Without the chain, hydration reads the bodies alone: plucked strings, the cheapest read there is.
  const selectBodies = db.prepare<[string, number, number], string>('SELECT body FROM runes WHERE stream = ? AND seq > ? ORDER BY seq LIMIT ?').pluck();
  const selectSnapshot = db.prepare<[string], { seq: number; state: string }>('SELECT seq, state FROM snapshots WHERE stream = ?');
  const upsertSnapshot = db.prepare<[string, number, string]>(
    'INSERT INTO snapshots (stream, seq, state) VALUES (?, ?, ?) ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq, state = excluded.state',
  );
  const deleteRunes = db.prepare<[string, number]>('DELETE FROM runes WHERE stream = ? AND seq <= ?');

  const appendBatch = db.transaction((runes: readonly Rune[]) => {
    // Each stream's row as it was before the batch (machine and head); undefined for a new stream.
    // Each stream's row as it was before the batch (machine and head); undefined for a new stream.
    // `hash`: its chain's last hash, carried through the batch's runes.
    const rows = new Map<string, { machine: string; seq: number; hash: number | null } | undefined>();
    const lastOf = new Map<string, Rune>();
    const heads = checkBatch(runes, (stream) => {
      const row = selectHeadHash.get(stream);
      rows.set(stream, row);
      return row?.seq ?? 0;
    });
    for (const rune of runes) {
      let row = rows.get(rune.stream);
      if (row === undefined) {
        // checkBatch let it through, so this is seq 1: the spawn creates its stream.
        insertStream.run(rune.stream, rune.machine);
        rows.set(rune.stream, (row = { machine: rune.machine, seq: 0, hash: CHAIN_START }));
      }
      const body = encodeBody(rune, row.machine);
      const payload = rune.payload === undefined ? null : JSON.stringify(rune.payload);
      // A stream without a hash yet (its runes written before the chain): it starts here.
      if (hashChain) row.hash = chainHash(row.hash ?? CHAIN_START, rune.kind, body, payload);
      insertRune.run(rune.stream, rune.seq, rune.kind, body, payload, hashChain ? row.hash : null);
      lastOf.set(rune.stream, rune);
    }
    for (const [stream, seq] of heads) {
      const last = lastOf.get(stream)!;
      const row = rows.get(stream)!;
      if (advanceHead.run(seq, last.to ?? null, last.at, hashChain ? row.hash : null, stream, row.seq).changes !== 1) {
        throw new StoreError('seq_conflict', `stream "${stream}": its head moved during the batch; nothing of the batch was written`);
      }
    }
  });

  const saveSnapshot = db.transaction((snapshot: Snapshot, state: string) => {
    const head = selectHead.get(snapshot.stream);
    if (head === undefined) throw new StoreError('unknown_stream', `stream "${snapshot.stream}" has no runes to snapshot`);
    if (snapshot.seq > head.seq) throw new StoreError('unknown_stream', `stream "${snapshot.stream}" has no seq ${snapshot.seq} yet`);
    if ((selectSnapshot.get(snapshot.stream)?.seq ?? 0) <= snapshot.seq) upsertSnapshot.run(snapshot.stream, snapshot.seq, state);
  });

  const prune = db.transaction((stream: string, throughSeq: number): number => {
    if (selectHead.get(stream) === undefined) return 0;
    const covered = selectSnapshot.get(stream)?.seq ?? 0;
    if (throughSeq > covered) throw prunePastSnapshot(stream, throughSeq, covered);
    return deleteRunes.run(stream, throughSeq).changes;
  });

  const selectOldest = db.prepare<[string], number | null>('SELECT min(seq) FROM runes WHERE stream = ?').pluck();
  const restore = db.transaction((runes: readonly Rune[]): number => {
    const first = runes[0]!;
    const row = selectHead.get(first.stream);
    checkRestore(runes, row === undefined ? undefined : headFromRow(row), selectOldest.get(first.stream) ?? (row?.seq ?? 0) + 1);
    // Newest first: each goes in right below the oldest stored rune, as the trigger wants.
    for (let i = runes.length - 1; i >= 0; i--) {
      const rune = runes[i]!;
      // Without a hash: its archive's checksum vouched for it; the chain resumes at the hot runes.
      insertRune.run(rune.stream, rune.seq, rune.kind, encodeBody(rune, row!.machine), rune.payload === undefined ? null : JSON.stringify(rune.payload), null);
    }
    return runes.length;
  });

  /**
   * A stream's stored rows with `seq > afterSeq`, at most `limit`, each checked against its hash
   * chain: a rune whose hash and its predecessor's (read too) do not chain is refused with
   * `chain_broken`. A rune whose predecessor has no hash (written before the chain, restored from
   * an archive) or is not stored (pruned) starts the chain again: its own hash is taken as it is.
   */
  const checkedRows = (stream: string, afterSeq: number, limit: number): StoredRune[] => {
    const count = limit === Infinity ? -1 : Math.max(0, Math.floor(limit));
    if (count === 0) return [];
    const rows = selectRunes.all(stream, afterSeq, count < 0 ? -1 : afterSeq === 0 ? count : count + 1);
    const first = rows[0]?.[0] === afterSeq ? 1 : 0; // the predecessor, read to check the first link
    if (hashChain) {
      let previous = first === 1 ? rows[0]![4] : afterSeq === 0 ? CHAIN_START : null;
      let expectedSeq = afterSeq + 1;
      for (let i = first; i < rows.length; i++) {
        const [seq, kind, body, payload, hash] = rows[i]!;
        if (hash !== null && previous !== null && seq === expectedSeq && chainHash(previous, kind, body, payload) !== hash) throw chainBroken(path, stream, seq);
        previous = hash;
        expectedSeq = seq + 1;
      }
    }
    if (first === 1) rows.shift();
    else if (count >= 0 && rows.length > count) rows.pop();
    return rows;
  };

  const { open, close } = openState();
  /** Runs `operation` on the open database; what SQLite throws becomes a {@link StoreError}. */
  const run = <T>(operation: () => T): T => {
    open();
    try {
      return operation();
    } catch (error) {
      throw storeErrorOf(path, error);
    }
  };

  return {
    async append(runes) {
      if (runes.length > 0) run(() => appendBatch.immediate(runes));
      else open();
    },
    async head(stream): Promise<StreamHead | undefined> {
      const row = run(() => selectHead.get(stream));
      return row === undefined ? undefined : headFromRow(row);
    },
    async *heads(query = {}) {
      const { prefix = '' } = query;
      // A prefix usually names a few streams (a conversation's): its first page is small and each
      // next one doubles, so listing them reads a handful of rows past the prefix, not a thousand.
      let page = prefix === '' ? HEADS_PAGE : FIRST_PREFIX_PAGE;
      // Stream ids in order: those with the prefix follow the prefix itself, all in one run.
      let after = prefix;
      if (prefix !== '') {
        const exact = run(() => selectHead.get(prefix));
        if (exact !== undefined && headMatches(headFromRow(exact), query)) yield headFromRow(exact);
      }
      for (;;) {
        const rows = run(() => (query.machine === undefined ? selectHeads.all(after, page) : selectHeadsOf.all(query.machine, after, page)));
        for (const row of rows) {
          if (!row.stream.startsWith(prefix)) return;
          const head = headFromRow(row);
          if (headMatches(head, query)) yield head;
        }
        if (rows.length < page) return;
        after = rows[rows.length - 1]!.stream;
        page = Math.min(HEADS_PAGE, page * 2);
      }
    },
    async read(stream, afterSeq = 0, limit = Infinity) {
      const { head, rows } = run(() => {
        const head = selectHead.get(stream);
        return { head, rows: head === undefined ? [] : checkedRows(stream, afterSeq, limit) };
      });
      return rows.map(([seq, kind, body, payload]): Rune => {
        const rune: Rune = { stream, seq, machine: head!.machine, kind, ...(JSON.parse(body) as RuneBody) };
        if (payload !== null) rune.payload = JSON.parse(payload) as Rune['payload'];
        return rune;
      });
    },
    async readEvents(stream, afterSeq = 0, limit = Infinity) {
      if (!hashChain) {
        const bodies = run(() => selectBodies.all(stream, afterSeq, limit === Infinity ? -1 : Math.max(0, Math.floor(limit))));
        return bodies.map((body) => (JSON.parse(body) as RuneBody).event);
      }
      const rows = run(() => checkedRows(stream, afterSeq, limit));
      return rows.map((row) => (JSON.parse(row[2]) as RuneBody).event);
    },
    async latestSnapshot(stream) {
      const row = run(() => selectSnapshot.get(stream));
      return row === undefined ? undefined : { stream, seq: row.seq, state: JSON.parse(row.state) as unknown };
    },
    async saveSnapshot(snapshot) {
      open();
      const state = JSON.stringify(snapshot.state) as string | undefined;
      if (state === undefined) throw new TypeError(`stream "${snapshot.stream}": a snapshot's state must be JSON; JSON.stringify gave undefined`);
      run(() => saveSnapshot.immediate(snapshot, state));
    },
    async prune(stream, throughSeq) {
      return run(() => prune.immediate(stream, throughSeq));
    },
    async restore(runes) {
      if (runes.length === 0) {
        open();
        return 0;
      }
      return run(() => restore.immediate(runes));
    },
    async close() {
      if (!close()) return;
      try {
        db.close();
      } catch (error) {
        throw storeErrorOf(path, error);
      }
    },
  };
}

/** A stored rune's row as `selectRunes` reads it: seq, kind, body, payload, hash. */
type StoredRune = [seq: number, kind: string, body: string, payload: string | null, hash: number | null];

/** The refusal of a stream one of whose runes does not match its hash chain. */
const chainBroken = (path: string, stream: string, seq: number): StoreError =>
  new StoreError(
    'chain_broken',
    `sqliteStore "${path}": stream "${stream}": rune ${seq} does not match its hash chain (its stored bytes changed after it was written: a damaged page or WAL frame); the stream is refused, other streams are served as before`,
  );

/**
 * The `body` of a rune: its JSON without the row's columns. Key order follows {@link Rune}, and
 * `read` spreads the body after `stream, seq, machine, kind`, so a rune reads back with its keys
 * in the order they were written.
 */
function encodeBody(rune: Rune, machine: string): string {
  return JSON.stringify(
    rune.machine === machine
      ? { event: rune.event, from: rune.from, to: rune.to, at: rune.at }
      : { machine: rune.machine, event: rune.event, from: rune.from, to: rune.to, at: rune.at },
  );
}
