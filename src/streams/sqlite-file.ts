import { randomBytes } from 'node:crypto';
import { closeSync, constants, copyFileSync, linkSync, openSync, readSync, rmSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { errorText } from '../reducers/error-text.js';
import { isLockedError, storeErrorOf } from './sqlite-errors.js';
import { OLDEST_SCHEMA_VERSION, SCHEMA, SCHEMA_OBJECTS, SQLITE_APPLICATION_ID, SQLITE_SCHEMA_VERSION } from './sqlite-schema.js';
import { walDamage } from './sqlite-wal.js';
import { StoreError } from './store.js';

/**
 * What opening a SQLite store checks of its file before anything is written to it (and creates
 * when there is none): a runestream file of a schema version this code reads, an intact WAL, pages
 * SQLite finds sound.
 */
const SQLITE_MAGIC = Buffer.from('SQLite format 3\0', 'latin1');
const SQLITE_HEADER_BYTES = 100;

/**
 * Creates a runestream file at `path` unless something is there. The file is built under a
 * temporary name and then linked into place, which fails if `path` appeared meanwhile (another
 * process opening the same path first): `path` never holds a half-created file.
 */
export function createIfAbsent(path: string): void {
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

export const invalidFile = (path: string, problem: string): StoreError => new StoreError('invalid_file', `cannot open "${path}": ${problem}; the file was left untouched`);

const hex = (n: number): string => `0x${(n >>> 0).toString(16).padStart(8, '0')}`;

/**
 * Checks that `path` is a runestream file this code reads, without writing to it. The SQLite
 * header is read as bytes first, so a foreign or corrupt file is refused before SQLite opens it
 * (no `-wal` / `-shm` appear next to it). A file that passes is then opened read-only to check
 * what the header cannot show: the schema, and the pragmas as the WAL has them. A file another
 * process holds is refused as `locked`, after waiting up to `busyTimeoutMs` for it.
 */
export function checkFile(path: string, busyTimeoutMs: number, integrityCheck: 'quick' | 'off'): void {
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
    if (version >= 6 && !columns.includes('origin')) throw invalidFile(path, `its schema version is ${version}, but its runes table has no "origin" column`);
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
