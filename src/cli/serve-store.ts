import type { EffectOwnership } from '../streams/effect-host.js';
import type { FenceOf } from '../streams/commit-queue.js';
import { sqliteStore } from '../streams/sqlite-store.js';
import type { ShardLeases } from '../streams/postgres/shard-leases.js';
import type { RuneStore } from '../streams/store.js';
import type { Command } from './args.js';

/** The log `runestream serve` writes, with what its engine needs to share it. */
export interface ServeStore {
  readonly store: RuneStore;
  /** With a PostgreSQL log: follow the other processes' runes, run only the owned streams' effects, fence their appends. */
  readonly engineOptions: { readonly followStore?: true; readonly ownership?: EffectOwnership; readonly fence?: FenceOf };
  /** With a PostgreSQL log: this process's id among those sharing it (its leases' owner). */
  readonly processId?: string;
  /** With a PostgreSQL log: this process's shard leases (which streams' effects it runs). */
  readonly leases?: ShardLeases;
  /** The log in words, for the line that says where serve listens (never a password). */
  readonly description: string;
  /** Hands back what this process holds besides the store (its shard leases, at once): after the engine closed, which closes the store. */
  release(): Promise<void>;
}

/**
 * The PostgreSQL schema a `--store` URL names with `?schema=` (default `runestream`), and the URL
 * without it, as `pg` takes it.
 */
export function storeUrlOf(url: string): { connectionString: string; schema?: string; description: string } {
  const parsed = new URL(url);
  const schema = parsed.searchParams.get('schema') ?? undefined;
  parsed.searchParams.delete('schema');
  const shown = new URL(parsed.href);
  if (shown.password !== '') shown.password = '***';
  return { connectionString: parsed.href, ...(schema === undefined ? {} : { schema }), description: `${shown.href}${schema === undefined ? '' : ` schema ${schema}`}` };
}

/**
 * Opens the log `serve` was given: the SQLite file `db`, or the PostgreSQL database of `store`
 * with this process's shard leases on it (pg is loaded only then). The leases take a fair share
 * of the streams' effects and fence their appends, so a process that lost its share cannot write
 * for it any more.
 */
export async function openServeStore(command: Extract<Command, { command: 'serve' }>): Promise<ServeStore> {
  if (command.store === undefined) {
    // In a thread of its own: a server's commits then run beside its event loop, not in it.
    const store = sqliteStore(command.db, { thread: true });
    return { store, engineOptions: {}, description: command.db, release: async () => undefined };
  }
  const { postgresStore, shardLeases } = await import('../postgres.js');
  const { connectionString, schema, description } = storeUrlOf(command.store.url);
  const store = await postgresStore({ connectionString, ...(schema === undefined ? {} : { schema }) });
  let leases: ShardLeases;
  try {
    leases = await shardLeases({
      connectionString,
      ...(schema === undefined ? {} : { schema }),
      ...(command.store.leaseMs === undefined ? {} : { leaseMs: command.store.leaseMs }),
      raiseFence: (fence) => store.raiseFence(fence),
    });
  } catch (error) {
    await store.close();
    throw error;
  }
  return {
    store,
    engineOptions: { followStore: true, ownership: leases, fence: (stream) => leases.fenceOf(stream) },
    processId: leases.owner,
    leases,
    description: `${description} (shard leases of ${leases.owner})`,
    release: () => leases.close(),
  };
}
