/**
 * runestream/postgres: several server processes on one PostgreSQL database, through `pg` (which is
 * why it is not in the root). The store they share (its errors are the root's `StoreError`s, with
 * the codes `invalid_database`, `unavailable`, `io_error`, `batch_too_large` and `invalid_rune`
 * besides the shared ones); the shard leases that decide which process runs which streams' effects
 * (pass them to the engine as its `ownership` and `fence`); the shard function every process
 * agrees on; and the leases' tables.
 */
export {
  POSTGRES_DEFAULTS,
  postgresStore,
  type PostgresStore,
  type PostgresStoreOptions,
  type PostgresTailStart,
} from './streams/postgres/postgres-store.js';
export { POSTGRES_SCHEMA_VERSION } from './streams/postgres/schema.js';
export { leaseTablesDdl } from './streams/postgres/lease-tables.js';
export { ShardLeasesError, shardLeases, type ShardLeases, type ShardLeasesOptions } from './streams/postgres/shard-leases.js';
export { ownershipKey, shardOf } from './streams/postgres/shard-of.js';
