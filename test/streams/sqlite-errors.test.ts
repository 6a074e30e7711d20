import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { storeErrorOf } from '../../src/streams/sqlite-errors.js';
import { StoreError } from '../../src/streams/store.js';

// The codes a real file rarely gives on demand (a full disk, a failing device): each one built as
// better-sqlite3 throws it, checked to come out as the StoreError an operator can act on.
describe('storeErrorOf: what SQLite says, as a StoreError code', () => {
  const cases: [sqliteCode: string, storeCode: string][] = [
    ['SQLITE_BUSY', 'locked'],
    ['SQLITE_BUSY_SNAPSHOT', 'locked'],
    ['SQLITE_LOCKED', 'locked'],
    ['SQLITE_FULL', 'disk_full'],
    ['SQLITE_READONLY', 'read_only'],
    ['SQLITE_READONLY_DIRECTORY', 'read_only'],
    ['SQLITE_IOERR_WRITE', 'io_error'],
    ['SQLITE_IOERR_FSYNC', 'io_error'],
    ['SQLITE_CORRUPT', 'corrupt_file'],
    ['SQLITE_CORRUPT_INDEX', 'corrupt_file'],
    ['SQLITE_NOTADB', 'io_error'],
    ['SQLITE_CANTOPEN', 'io_error'],
    ['SQLITE_CONSTRAINT_TRIGGER', 'seq_conflict'],
    ['SQLITE_CONSTRAINT_PRIMARYKEY', 'seq_conflict'],
  ];
  it.each(cases)("%s -> %s, naming the file and keeping SQLite's error as the cause", (sqliteCode, storeCode) => {
    const sqliteError = new Database.SqliteError('what SQLite said', sqliteCode);
    const error = storeErrorOf('/data/agents.db', sqliteError);
    expect(error).toBeInstanceOf(StoreError);
    expect(error).toMatchObject({ code: storeCode, cause: sqliteError });
    expect((error as Error).message).toContain('what SQLite said');
    if (storeCode !== 'seq_conflict') expect((error as Error).message).toContain(`sqliteStore "/data/agents.db": `);
  });

  it("passes on what it does not know: other SQLite codes, and errors that are not SQLite's", () => {
    const misuse = new Database.SqliteError('bad parameter', 'SQLITE_MISUSE');
    expect(storeErrorOf('x.db', misuse)).toBe(misuse);
    const plain = new TypeError('not sqlite');
    expect(storeErrorOf('x.db', plain)).toBe(plain);
  });
});
