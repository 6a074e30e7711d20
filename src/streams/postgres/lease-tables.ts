/**
 * The tables of shard leases in `schema` (a checked identifier), created if absent:
 * - `rs_leases`: one row per shard (`lease` is `shard-<k>`), its `owner` (null when free), the
 *   `epoch` of its newest owner (each taking bumps it: the fencing token) and when it expires;
 * - `rs_members`: the live processes (each heartbeats its row), so each can work out its fair share,
 *   with the shard count each runs with (processes with different counts would disagree on every
 *   stream's shard).
 *
 * Expiry is the database's clock (`now()`), never a process's. Exported so that the store's
 * migration can take the tables over.
 */
export function leaseTablesDdl(schema: string): string {
  const name = `"${schema}"`;
  return [
    `CREATE TABLE IF NOT EXISTS ${name}.rs_leases (lease text PRIMARY KEY, owner text, epoch bigint NOT NULL DEFAULT 0, expires_at timestamptz)`,
    `CREATE TABLE IF NOT EXISTS ${name}.rs_members (owner text PRIMARY KEY, shards integer NOT NULL, expires_at timestamptz NOT NULL)`,
  ].join(';\n');
}
