/**
 * runestream/sqlite: the embedded store, one SQLite file through better-sqlite3 (a native
 * binding, which is why it is not in the root). Its errors are the root's `StoreError`s, with the
 * codes `locked`, `disk_full`, `read_only`, `io_error` and `invalid_file` besides the shared ones.
 */
export { sqliteStore, type SqliteStoreOptions } from './streams/sqlite-store.js';
