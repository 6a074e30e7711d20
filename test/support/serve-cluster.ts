import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { WebSocket } from 'ws';
import { createClient, type RunestreamClient } from '../../src/server/client/index.js';
import { shardOf } from '../../src/postgres.js';
import { POSTGRES_URL, randomSchema } from './postgres.js';
import { LISTENING, runestream, tempDb } from './runestream-process.js';

/**
 * Real `runestream serve --store postgres://...` processes on one schema, for tests across
 * operating-system processes. A test file keeps `schemas` and `clients` and cleans up after each
 * test (`cleanUpProcesses`, `dropSchemas(cluster.schemas)`, closing `cluster.clients`).
 */
export interface ServeCluster {
  readonly schemas: string[];
  readonly clients: RunestreamClient[];
}

export const serveCluster = (): ServeCluster => ({ schemas: [], clients: [] });

/** A configuration file for the processes: the demo model; the metrics snapshots in a temporary folder, not the working one. */
export function configFile(extra: object = {}): string {
  const config = join(dirname(tempDb()), 'runestream.json');
  writeFileSync(
    config,
    JSON.stringify({
      models: { offline: { type: 'demo' } },
      agents: { assistant: { model: 'offline', tools: ['save_note'] } },
      defaultRole: 'assistant',
      metrics: { file: 'metrics.json', flushEveryMs: 300 },
      ...extra,
    }),
  );
  return config;
}

/** `runestream serve --store` on `schema` through `url`, leases of `leaseMs`. */
export const serveOn = (url: string, schema: string, config: string, leaseMs = 1500) =>
  runestream(['serve', '--port', '0', '--store', `${url}?schema=${schema}`, '--lease-ms', String(leaseMs), '--config', config]);

export type ServeProcess = ReturnType<typeof serveOn>;

/** A fresh schema, remembered for dropping. */
export function freshSchema(cluster: ServeCluster): string {
  const schema = randomSchema();
  cluster.schemas.push(schema);
  return schema;
}

/** A client of the process listening at `url`, remembered for closing. */
export function clientOf(cluster: ServeCluster, url: string): RunestreamClient {
  const client = createClient({ url, WebSocket });
  cluster.clients.push(client);
  return client;
}

/** Runs one query on a connection of its own. */
export async function query<R extends object>(text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** The stored seqs of `stream`, in order. */
export const storedSeqs = async (schema: string, stream: string): Promise<number[]> =>
  (await query<{ seq: string }>(`SELECT seq FROM "${schema}".rs_runes WHERE stream = $1 ORDER BY seq`, [stream])).map((row) => Number(row.seq));

/** The stored rune kinds of `stream`, in seq order. */
export const storedKinds = async (schema: string, stream: string): Promise<string[]> =>
  (await query<{ kind: string }>(`SELECT kind FROM "${schema}".rs_runes WHERE stream = $1 ORDER BY seq`, [stream])).map((row) => row.kind);

/** Who holds a shard's lease now, and its epoch. */
export const leaseOf = async (schema: string, shard: number): Promise<{ owner: string; epoch: number } | undefined> => {
  const [row] = await query<{ owner: string; epoch: string }>(`SELECT owner, epoch FROM "${schema}".rs_leases WHERE lease = $1`, [`shard-${shard}`]);
  return row === undefined ? undefined : { owner: row.owner, epoch: Number(row.epoch) };
};

/** The lease owner of `stream`'s shard now. */
export const ownerOfStream = async (schema: string, stream: string): Promise<string | undefined> => (await leaseOf(schema, shardOf(stream, 64)))?.owner;

/**
 * Polls `check` until it holds; after `timeoutMs`, fails naming `what` (a step that never comes
 * says which it was, where the test's own deadline would only say it ran out).
 */
export async function eventually(check: () => Promise<boolean>, what = 'the condition', timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`eventually: ${what} did not hold within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The lease owner a process printed it runs as. */
export const ownerOf = async (cli: ServeProcess): Promise<string> => (await cli.line(/\(shard leases of ([^)]+)\)/))[1]!;

/** The first of `prefix`0, `prefix`1, ... whose shard is one of the lowest eight: one a process started alone keeps when others join. */
export const lowShardId = (prefix: string, suffix = ''): string => Array.from({ length: 500 }, (_, i) => `${prefix}${i}`).find((id) => shardOf(`${id}${suffix}`, 64) < 8)!;

/**
 * A test's deadline when it runs several serve processes (each starts node with tsx, then waits for
 * leases to settle): alone such a test takes 10-20 s; under CI's parallel load one took over 30 s.
 */
export const CLUSTER_TEST_TIMEOUT = 90_000;

/**
 * One process started alone on a fresh schema (so it holds every shard; it keeps the lowest ones
 * when the others join), then `survivors` more, once every process holds shards: the owner is the
 * one to kill -9, a survivor takes its shards over.
 */
export async function ownerAndSurvivors(cluster: ServeCluster, config: string, survivors = 2, leaseMs = 1000) {
  const schema = freshSchema(cluster);
  const owner = serveOn(POSTGRES_URL, schema, config, leaseMs);
  const [, ownerUrl] = await owner.line(LISTENING);
  const ownerId = await ownerOf(owner);
  const others = Array.from({ length: survivors }, () => serveOn(POSTGRES_URL, schema, config, leaseMs));
  const survivorUrls = await Promise.all(others.map(async (cli) => (await cli.line(LISTENING))[1]!));
  const survivorIds = await Promise.all(others.map(ownerOf));
  await eventually(async () => (await query(`SELECT DISTINCT owner FROM "${schema}".rs_leases`)).length === survivors + 1);
  return { schema, owner, ownerUrl: ownerUrl!, ownerId, survivors: others, survivorUrls, survivorIds };
}
