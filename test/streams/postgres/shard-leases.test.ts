import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { StoreFencedError, memoryStore, type Fence } from '../../../src/index.js';
import { leaseTablesDdl, ownershipKey, shardLeases, shardOf, type ShardLeases, type ShardLeasesOptions } from '../../../src/postgres.js';
import { runeOf } from '../../../src/streams/store-contract.js';
import { pgTestSchema } from '../../support/pg-schema.js';
import { POSTGRES_URL as PG_URL, postgresUrlVia as pgUrlThrough } from '../../support/postgres.js';
import { tcpProxy, type TcpProxy } from '../../support/tcp-proxy.js';

// Real PostgreSQL, real time, short leases: every wait is for a condition, with a generous timeout.
const LEASE_MS = 600;
const RENEW_EVERY_MS = 150;
const WAIT = { timeout: 15_000, interval: 25 };

const database = pgTestSchema();
const open: ShardLeases[] = [];
const proxies: TcpProxy[] = [];

beforeAll(async () => {
  await database.pool.query(`CREATE SCHEMA "${database.schema}"; ${leaseTablesDdl(database.schema)}`);
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((leases) => leases.close()));
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
  await database.pool.query(`DELETE FROM "${database.schema}".rs_leases; DELETE FROM "${database.schema}".rs_members`);
});
afterAll(() => database.drop());

async function manager(owner: string, options: Partial<ShardLeasesOptions> = {}): Promise<ShardLeases> {
  const leases = await shardLeases({
    connectionString: PG_URL,
    schema: database.schema,
    owner,
    leaseMs: LEASE_MS,
    renewEveryMs: RENEW_EVERY_MS,
    ...options,
  });
  open.push(leases);
  return leases;
}

/** Each shard's owners among `managers`, as they each see it now. */
const ownersByShard = (managers: readonly ShardLeases[], shards = 64): string[][] =>
  Array.from({ length: shards }, (_, shard) => managers.filter((leases) => leases.owned().includes(shard)).map((leases) => leases.owner));

/** Fails at once if two managers own one shard at the same moment; true when every shard has exactly one owner. */
function eachShardOnce(managers: readonly ShardLeases[]): boolean {
  const owners = ownersByShard(managers);
  const shared = owners.map((names, shard) => [shard, names] as const).filter(([, names]) => names.length > 1);
  expect(shared, 'a shard owned by two processes at once').toEqual([]);
  return owners.every((names) => names.length === 1);
}

/** The epochs of `leases`'s shards, by shard. */
const epochsOf = (leases: ShardLeases): Map<number, number> => new Map(leases.owned().map((shard) => [shard, leases.fenceOf(streamOfShard(shard))!.epoch]));

/** A stream of each shard, found by trying names: the tests name a stream by the shard it falls in. */
const streamsByShard = new Map<number, string>();
for (let n = 0; streamsByShard.size < 64; n++) if (!streamsByShard.has(shardOf(`s${n}`, 64))) streamsByShard.set(shardOf(`s${n}`, 64), `s${n}`);
const streamOfShard = (shard: number): string => streamsByShard.get(shard)!;

describe('shardOf', () => {
  it("keys a conversation's streams together, and is a stable FNV-1a of the key", () => {
    expect(ownershipKey('conv/c1/agent/a/turn')).toBe('conv/c1');
    expect(ownershipKey('chat/c9/actor/3')).toBe('chat/c9');
    expect(ownershipKey('conv/c1')).toBe('conv/c1');
    expect(ownershipKey('runs/archival/1')).toBe('runs/archival/1');
    expect(shardOf('conv/c1/agent/a/call/x', 64)).toBe(shardOf('conv/c1', 64));
    // Pinned: every process, of every version, must agree on these.
    expect([shardOf('', 64), shardOf('a', 64), shardOf('conv/c1', 64), shardOf('conv/c1', 7)]).toMatchInlineSnapshot(`
      [
        5,
        44,
        16,
        5,
      ]
    `);
  });
});

describe('shardLeases options', () => {
  it('refuses bad options with a TypeError naming the option', async () => {
    const refused = async (options: unknown): Promise<string> => {
      const error = await shardLeases(options as ShardLeasesOptions).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(TypeError);
      return (error as TypeError).message;
    };
    expect(await refused(null)).toMatchInlineSnapshot(`"shardLeases: the options must be an object, got null"`);
    expect(await refused({})).toMatchInlineSnapshot(`"shardLeases: give exactly one of the "connectionString" and "pool" options"`);
    expect(await refused({ connectionString: PG_URL, pool: database.pool })).toMatchInlineSnapshot(
      `"shardLeases: give exactly one of the "connectionString" and "pool" options"`,
    );
    expect(await refused({ connectionString: PG_URL, shard: 4 })).toMatchInlineSnapshot(
      `"shardLeases: unknown option "shard"; the options are "connectionString", "pool", "schema", "owner", "shards", "leaseMs", "renewEveryMs", "scheduler", "raiseFence""`,
    );
    expect(await refused({ connectionString: PG_URL, schema: 'Robert"; DROP TABLE x' })).toMatchInlineSnapshot(
      `"shardLeases: the "schema" option must be a lower-case SQL identifier (letters, digits, _; at most 63), got "Robert\\"; DROP TABLE x""`,
    );
    expect(await refused({ connectionString: PG_URL, owner: '' })).toMatchInlineSnapshot(`"shardLeases: the "owner" option must be a string of 1 to 200 characters, got """`);
    expect(await refused({ connectionString: PG_URL, shards: 0 })).toMatchInlineSnapshot(`"shardLeases: the "shards" option must be an integer from 1 to 4096, got 0"`);
    expect(await refused({ connectionString: PG_URL, shards: 5000 })).toMatchInlineSnapshot(`"shardLeases: the "shards" option must be an integer from 1 to 4096, got 5000"`);
    expect(await refused({ connectionString: PG_URL, leaseMs: 50 })).toMatchInlineSnapshot(
      `"shardLeases: the "leaseMs" option must be an integer from 100 to 3600000 (milliseconds), got 50"`,
    );
    expect(await refused({ connectionString: PG_URL, leaseMs: 1000, renewEveryMs: 600 })).toMatchInlineSnapshot(
      `"shardLeases: the "renewEveryMs" option must be an integer from 10 to leaseMs / 2 (500), got 600"`,
    );
    expect(await refused({ connectionString: PG_URL, scheduler: {} })).toMatchInlineSnapshot(
      `"shardLeases: the "scheduler" option must be an RxJS scheduler, got [object Object]"`,
    );
    expect(await refused({ connectionString: PG_URL, raiseFence: 'yes' })).toMatchInlineSnapshot(
      `"shardLeases: the "raiseFence" option must be a function (the store's raiseFence), got "yes""`,
    );
  });

  it('refuses to start beside a live process with another shard count, with a stable code', async () => {
    await manager('a');
    await expect(manager('b', { shards: 32 })).rejects.toMatchObject({ name: 'ShardLeasesError', code: 'shard_count_mismatch' });
  });
});

describe('shardLeases', () => {
  it('splits the shards among three processes, each exactly once and fairly, and rebalances when a fourth joins', async () => {
    const three = [await manager('a'), await manager('b'), await manager('c')];
    await vi.waitFor(() => {
      expect(eachShardOnce(three)).toBe(true);
      expect(three.map((leases) => leases.owned().length).sort((x, y) => x - y)).toEqual([20, 22, 22]);
    }, WAIT);
    const four = [...three, await manager('d')];
    await vi.waitFor(() => {
      expect(eachShardOnce(four)).toBe(true);
      expect(four.map((leases) => leases.owned().length)).toEqual([16, 16, 16, 16]);
    }, WAIT);
    // The database agrees: each lease held by the process that says it owns it.
    const { rows } = await database.pool.query<{ lease: string; owner: string }>(`SELECT lease, owner FROM "${database.schema}".rs_leases WHERE expires_at > now()`);
    const owners = ownersByShard(four);
    for (const { lease, owner } of rows) expect([owner]).toEqual(owners[Number(lease.slice('shard-'.length))]);
  });

  it('a process partitioned from the database stops owning by its deadline; survivors take over with higher, fenced epochs', async () => {
    const raised = new Map<string, Fence[]>();
    const recording = (owner: string) => (fence: Fence) => {
      raised.set(owner, [...(raised.get(owner) ?? []), fence]);
      return Promise.resolve();
    };
    const proxy = await tcpProxy();
    proxies.push(proxy);
    const a = await manager('a', { raiseFence: recording('a') });
    const b = await manager('b', { raiseFence: recording('b') });
    const c = await manager('c', { raiseFence: recording('c'), connectionString: pgUrlThrough(proxy.port) });
    await vi.waitFor(() => expect(eachShardOnce([a, b, c]) && c.owned().length > 0).toBe(true), WAIT);
    const before = epochsOf(c);
    // Every lease c owns was fenced with its epoch before c owned it.
    for (const [shard, epoch] of before) expect(raised.get('c')).toContainEqual({ lease: `shard-${shard}`, epoch });

    proxy.hold();
    await vi.waitFor(() => expect(c.owned()).toEqual([]), WAIT);
    for (const [shard] of before) expect(c.owns(streamOfShard(shard))).toBe(false);
    await vi.waitFor(() => expect(eachShardOnce([a, b, c])).toBe(true), WAIT);
    const survivors = new Map([...epochsOf(a), ...epochsOf(b)]);
    for (const [shard, epoch] of before) {
      const now = survivors.get(shard)!;
      expect(now).toBeGreaterThan(epoch);
      const taker = a.owned().includes(shard) ? 'a' : 'b';
      expect(raised.get(taker)).toContainEqual({ lease: `shard-${shard}`, epoch: now });
    }

    proxy.release();
    // Back, it gets its share again, each shard only with an epoch newer than the survivors' one.
    await vi.waitFor(() => expect(eachShardOnce([a, b, c]) && c.owned().length >= 20).toBe(true), WAIT);
    for (const [shard, epoch] of epochsOf(c)) {
      expect(epoch).toBeGreaterThan(survivors.get(shard)!);
      expect(raised.get('c')).toContainEqual({ lease: `shard-${shard}`, epoch });
    }
  });

  it('close() hands its shards over at once, not when they expire', async () => {
    // Leases of a minute: a survivor that waited for them to expire would time the wait below out.
    const a = await manager('a', { leaseMs: 60_000, renewEveryMs: 100 });
    const b = await manager('b', { leaseMs: 60_000, renewEveryMs: 100 });
    await vi.waitFor(() => expect(eachShardOnce([a, b]) && a.owned().length === 32).toBe(true), WAIT);
    const changes: (readonly number[])[] = [];
    const completed = new Promise<void>((resolve) => a.changes$.subscribe({ next: (owned) => changes.push(owned), complete: resolve }));
    await a.close();
    await completed;
    expect(changes).toEqual([[]]);
    expect(a.owns(streamOfShard(0))).toBe(false);
    await vi.waitFor(() => expect(b.owned()).toHaveLength(64), WAIT);
  });

  it('raises the fence before it owns: after a takeover, an append under the old epoch is refused', async () => {
    const store = memoryStore();
    /** The newest epoch raised of each lease: what the store fences by. */
    const raised = new Map<string, number>();
    const raiseFence = async (fence: Fence) => {
      await store.raiseFence!(fence);
      raised.set(fence.lease, Math.max(raised.get(fence.lease) ?? 0, fence.epoch));
    };
    const stream = 'conv/c1/agent/a/turn';
    const a = await manager('a', { raiseFence, shards: 1 });
    const old = a.fenceOf(stream)!;
    expect(old).toEqual({ lease: 'shard-0', epoch: expect.any(Number) });
    await store.append([runeOf(stream, 1)], { fences: [old] });

    const b = await manager('b', { raiseFence, shards: 1 });
    // Whenever b's owned set changes, the store already fences by the epoch b owns with.
    const unfenced: Fence[] = [];
    b.changes$.subscribe(() => {
      const fence = b.fenceOf(stream);
      if (fence !== undefined && (raised.get(fence.lease) ?? 0) < fence.epoch) unfenced.push(fence);
    });
    await a.close();
    await vi.waitFor(() => expect(b.owns(stream)).toBe(true), WAIT);
    const taken = b.fenceOf(stream)!;
    expect(taken.epoch).toBeGreaterThan(old.epoch);
    await expect(store.append([runeOf(stream, 2)], { fences: [old] })).rejects.toBeInstanceOf(StoreFencedError);
    expect(unfenced).toEqual([]);
    await store.append([runeOf(stream, 2)], { fences: [taken] });
    expect(await store.head(stream)).toMatchObject({ seq: 2 });
  });
});
