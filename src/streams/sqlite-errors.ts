import Database from 'better-sqlite3';
import { StoreError, type StoreErrorCode } from './store.js';

/**
 * Whether SQLite refused for another connection's lock on the file. A store holds its file's lock
 * from open to close, so this is another process (or store) holding the file.
 */
export const isLockedError = (error: unknown): boolean =>
  error instanceof Database.SqliteError && (error.code.startsWith('SQLITE_BUSY') || error.code.startsWith('SQLITE_LOCKED'));

/**
 * What SQLite threw, as a {@link StoreError} with a stable code and the SQLite error as its
 * `cause`; any other error as it is. A constraint the database itself refused (its triggers, the
 * primary key) is a seq conflict: the write broke the log's rules.
 */
export function storeErrorOf(path: string, error: unknown): unknown {
  if (!(error instanceof Database.SqliteError)) return error;
  const { code } = error;
  const said = `(${code}: ${error.message})`;
  const as = (storeCode: StoreErrorCode, problem: string): StoreError => new StoreError(storeCode, `sqliteStore "${path}": ${problem} ${said}`, { cause: error });
  if (code === 'SQLITE_CONSTRAINT_TRIGGER' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
    return new StoreError('seq_conflict', `the database refused the batch (${error.message}); nothing of the batch was written`, { cause: error });
  }
  if (isLockedError(error)) {
    return as(
      'locked',
      'another process has the file open for writing (a runestream server, or another program holding its lock); stop that process first, or use the PostgreSQL store for several processes on one log',
    );
  }
  if (code === 'SQLITE_FULL') return as('disk_full', 'the disk is full; nothing was written');
  if (code.startsWith('SQLITE_READONLY')) return as('read_only', 'the file cannot be written; nothing was written');
  // Damaged pages met while reading or writing: the same code as the check at open finds them with.
  if (code.startsWith('SQLITE_CORRUPT')) return as('corrupt_file', "SQLite found the file's pages damaged (run PRAGMA quick_check on it; restore it from a copy)");
  if (code.startsWith('SQLITE_IOERR') || code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CANTOPEN')) {
    return as('io_error', 'SQLite could not read or write the file');
  }
  return error;
}
