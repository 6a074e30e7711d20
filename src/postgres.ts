/**
 * runestream/postgres: several processes on one PostgreSQL database. The shard leases that decide
 * which process runs which streams' effects (pass them to the engine as its `ownership`), the
 * shard function every process agrees on, and the leases' tables, for a migration to take over.
 * Loads `pg`, which is why it is not in the root.
 */
export { leaseTablesDdl } from './streams/postgres/lease-tables.js';
export { ShardLeasesError, shardLeases, type ShardLeases, type ShardLeasesOptions } from './streams/postgres/shard-leases.js';
export { ownershipKey, shardOf } from './streams/postgres/shard-of.js';
