/**
 * runestream/postgres: the store several server processes share, one PostgreSQL schema through
 * `pg` (which is why it is not in the root). Its errors are the root's `StoreError`s, with the
 * codes `invalid_database`, `unavailable`, `io_error` and `batch_too_large` besides the shared ones.
 */
export {
  POSTGRES_DEFAULTS,
  postgresStore,
  type PostgresStore,
  type PostgresStoreOptions,
  type PostgresTailStart,
} from './streams/postgres/postgres-store.js';
export { POSTGRES_SCHEMA_VERSION } from './streams/postgres/schema.js';
