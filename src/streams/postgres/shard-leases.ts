import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { EMPTY, Observable, Subject, Subscription, asyncScheduler, catchError, defer, exhaustMap, firstValueFrom, map, timeout, timer, type SchedulerLike } from 'rxjs';
import type { EffectOwnership } from '../effect-host.js';
import type { Fence } from '../store.js';
import { leaseTablesDdl } from './lease-tables.js';
import { shardOf } from './shard-of.js';

/** Options of {@link shardLeases}. Exactly one of `connectionString` and `pool`. */
export interface ShardLeasesOptions {
  /** The database, as a `postgres://` URL: the leases open a pool of their own (2 connections), ended by `close()`. */
  readonly connectionString?: string;
  /** A pool to use instead (left open by `close()`). */
  readonly pool?: pg.Pool;
  /** The schema of the lease tables, created if absent. Default `'runestream'`. */
  readonly schema?: string;
  /** This process's id, unique among the processes on the database. Default a random one. */
  readonly owner?: string;
  /** How many shards the streams are hashed into (1 to 4096); every process must use the same. Default 64. */
  readonly shards?: number;
  /**
   * How long a lease lasts without renewal (100 ms to 1 hour): a dead process's shards move to a
   * survivor within `leaseMs + renewEveryMs`. Default 10,000.
   */
  readonly leaseMs?: number;
  /** How often leases are renewed, taken and handed back (10 ms to `leaseMs / 2`). Default `leaseMs / 3`. */
  readonly renewEveryMs?: number;
  /** The scheduler of the renewal rounds and the local deadline. Default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
  /**
   * The store's `raiseFence`: called with every lease this process takes, with its new epoch,
   * before `owns` says yes for its streams, so a store that fences refuses the old owner's appends
   * from then on. Without it, a paused old owner can still write until its own deadline stops it.
   */
  readonly raiseFence?: (fence: Fence) => Promise<void>;
}

/** Which shards of the streams this process owns, by lease: an {@link EffectOwnership} for the engine. */
export interface ShardLeases extends EffectOwnership {
  /** This process's id in the lease tables. */
  readonly owner: string;
  /** How many shards the streams are hashed into. */
  readonly shards: number;
  /** Whether this process runs `stream`'s effects now: it holds its shard's lease and its local deadline has not passed. */
  owns(stream: string): boolean;
  /** Emits the owned shards whenever they change (taken, lost, handed back, or the local deadline passed). Completes on `close()`. */
  readonly changes$: Observable<readonly number[]>;
  /** The fence of `stream`'s shard (`{ lease: 'shard-<k>', epoch }`) while this process owns it, else undefined. */
  fenceOf(stream: string): Fence | undefined;
  /** The shards owned now, in increasing order. */
  owned(): readonly number[];
  /** Stops owning, hands its leases back (survivors take them at their next round), stops the rounds and ends its own pool. */
  close(): Promise<void>;
}

/** Why {@link shardLeases} refused to start. `code` is stable. */
export class ShardLeasesError extends Error {
  override readonly name = 'ShardLeasesError';
  constructor(
    /** `shard_count_mismatch`: a live process on the database hashes streams into a different number of shards. */
    readonly code: 'shard_count_mismatch',
    message: string,
  ) {
    super(message);
  }
}

const OPTION_NAMES = ['connectionString', 'pool', 'schema', 'owner', 'shards', 'leaseMs', 'renewEveryMs', 'scheduler', 'raiseFence'] as const;
const MAX_SHARDS = 4096;
const MIN_LEASE_MS = 100;
const MAX_LEASE_MS = 3_600_000;
const MIN_RENEW_EVERY_MS = 10;
const MAX_OWNER_LENGTH = 200;

/** The outcome of one round, from the database: the leases held from now on, by shard, with their epochs. */
interface Round {
  /** The scheduler's time when the round began: the database's expiry of every lease it holds is later than this plus `leaseMs`. */
  readonly startedAt: number;
  readonly held: ReadonlyMap<number, number>;
}

const leaseName = (shard: number): string => `shard-${shard}`;
const shardOfLease = (lease: string): number => Number(lease.slice('shard-'.length));
const leasesOf = (rows: readonly { lease: string; epoch: string }[]): Map<number, number> => new Map(rows.map((row) => [shardOfLease(row.lease), Number(row.epoch)]));
const ignore = (): void => {};

/**
 * Leases of shards of the streams on PostgreSQL: which process runs which streams' effects when
 * several share one log. Pass it to the engine as its `ownership`.
 *
 * 1. Every stream belongs to a shard ({@link shardOf}: a conversation's streams to one), every
 *    shard has a lease in `rs_leases`, and each process heartbeats a row in `rs_members`.
 * 2. Every `renewEveryMs`, in one transaction, a process renews the leases it holds (a lease it
 *    lost, or that expired, by the database's clock, is not renewed), hands back those above its
 *    fair share (`ceil(shards / live processes)`, no longer owned before they are freed), and takes
 *    free or expired ones up to that share, each taking bumping the lease's epoch.
 * 3. A lease taken is fenced (`raiseFence` with its new epoch) before `owns` says yes for its streams.
 * 4. A process that cannot reach the database stops owning by itself: `owns` turns false once its
 *    local deadline passes (its last successful round's start, plus `leaseMs`, less a tenth of
 *    `leaseMs` for the drift between its clock and the database's), before any survivor can take
 *    its leases. It gets a shard back only by taking it anew, with a new epoch.
 * 5. A round that takes longer than `leaseMs` is abandoned (its connection destroyed).
 *
 * Resolves after the tables exist and the first round took this process's share.
 *
 * ## Example
 * ```ts
 * import { randomBytes } from 'node:crypto';
 * import pg from 'pg';
 * import { createEngine, memoryStore } from 'runestream';
 * import { shardLeases } from 'runestream/postgres';
 * const pool = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:5432/test' });
 * const schema = `example_${randomBytes(6).toString('hex')}`;
 * const store = memoryStore();
 * const leases = await shardLeases({ pool, schema, leaseMs: 5000, raiseFence: (fence) => store.raiseFence!(fence) });
 * const engine = createEngine({ store, ownership: leases });
 * console.log(leases.owned().length, leases.fenceOf('conv/c1/agent/a/turn')?.lease === leases.fenceOf('conv/c1')?.lease);
 * // Logs: 64 true
 * await engine.close();
 * await leases.close();
 * await pool.query(`DROP SCHEMA ${schema} CASCADE`);
 * await pool.end();
 * ```
 */
export async function shardLeases(options: ShardLeasesOptions): Promise<ShardLeases> {
  const checked = checkOptions(options);
  const { schema, owner, shards, leaseMs, renewEveryMs, scheduler, raiseFence } = checked;
  const ownPool = checked.pool === undefined;
  const pool = checked.pool ?? new pg.Pool({ connectionString: checked.connectionString, max: 2, connectionTimeoutMillis: leaseMs });
  if (ownPool) pool.on('error', ignore); // an idle connection that broke: the next round opens another
  const margin = Math.ceil(leaseMs / 10);
  const leases = `"${schema}".rs_leases`;
  const members = `"${schema}".rs_members`;
  const allLeases = Array.from({ length: shards }, (_, shard) => leaseName(shard));

  /** The leases this process owns, by shard, with their epochs; only while `now < deadline`. */
  const held = new Map<number, number>();
  let deadline = -Infinity;
  let closed = false;
  const changes$ = new Subject<readonly number[]>();
  const owned = (): readonly number[] => (scheduler.now() < deadline ? [...held.keys()].sort((a, b) => a - b) : []);
  const ownedEpoch = (stream: string): number | undefined => (scheduler.now() < deadline ? held.get(shardOf(stream, shards)) : undefined);
  /** What `changes$` reports a change of: the owned shards and their epochs. */
  const ownership = (): string => (scheduler.now() < deadline ? [...held].join() : '');
  const drop = (shardsDropped: Iterable<number>): void => {
    let changed = false;
    for (const shard of shardsDropped) changed = held.delete(shard) || changed;
    if (changed) changes$.next(owned());
  };

  const setUp = async (): Promise<void> => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      // Concurrent CREATE ... IF NOT EXISTS can still collide on the catalog: one process at a time.
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`runestream.leases.${schema}`]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
      await client.query(leaseTablesDdl(schema));
      await client.query(`INSERT INTO ${leases} (lease) SELECT unnest($1::text[]) ON CONFLICT (lease) DO NOTHING`, [allLeases]);
      const others = await client.query<{ owner: string; shards: number }>(
        `SELECT owner, shards FROM ${members} WHERE expires_at > now() AND shards <> $1 AND owner <> $2 LIMIT 1`,
        [shards, owner],
      );
      const other = others.rows[0];
      if (other !== undefined) {
        throw new ShardLeasesError(
          'shard_count_mismatch',
          `shardLeases: the live process "${other.owner}" on schema "${schema}" runs with ${other.shards} shards, this one with ${shards}; every process must use the same "shards"`,
        );
      }
      await client.query('COMMIT');
      client.release();
    } catch (error) {
      client.release(error as Error); // destroyed: the transaction ends with it
      throw error;
    }
  };

  /** One round's queries, in one transaction on `client`; `mine` is what this process owned when it began. */
  const roundQueries = async (client: pg.PoolClient, mine: ReadonlyMap<number, number>): Promise<Map<number, number>> => {
    await client.query('BEGIN');
    // Leases this process holds on the database but does not own here (its deadline passed, a round was abandoned): freed.
    await client.query(`UPDATE ${leases} SET owner = NULL, expires_at = NULL WHERE owner = $1 AND NOT (lease = ANY($2::text[]))`, [owner, [...mine.keys()].map(leaseName)]);
    await client.query(
      `INSERT INTO ${members} (owner, shards, expires_at) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
       ON CONFLICT (owner) DO UPDATE SET shards = EXCLUDED.shards, expires_at = EXCLUDED.expires_at`,
      [owner, shards, leaseMs],
    );
    await client.query(`DELETE FROM ${members} WHERE expires_at <= now()`);
    const live = (await client.query<{ live: number }>(`SELECT count(*)::int AS live FROM ${members} WHERE expires_at > now()`)).rows[0]?.live ?? 1;
    const fair = Math.ceil(shards / Math.max(1, live));
    const renewed = leasesOf(
      (
        await client.query<{ lease: string; epoch: string }>(
          `UPDATE ${leases} SET expires_at = now() + $4 * interval '1 millisecond'
           WHERE owner = $1 AND expires_at > now() AND (lease, epoch) IN (SELECT * FROM unnest($2::text[], $3::bigint[]))
           RETURNING lease, epoch`,
          [owner, [...mine.keys()].map(leaseName), [...mine.values()], leaseMs],
        )
      ).rows,
    );
    drop([...mine.keys()].filter((shard) => !renewed.has(shard)));
    if (renewed.size > fair) {
      const handedBack = [...renewed.keys()].sort((a, b) => a - b).slice(fair);
      drop(handedBack); // no longer owned here before another process can take it
      for (const shard of handedBack) renewed.delete(shard);
      await client.query(`UPDATE ${leases} SET owner = NULL, expires_at = NULL WHERE owner = $1 AND lease = ANY($2::text[])`, [owner, handedBack.map(leaseName)]);
    }
    let taken = new Map<number, number>();
    if (renewed.size < fair) {
      const free = `(owner IS NULL OR expires_at <= now())`;
      taken = leasesOf(
        (
          await client.query<{ lease: string; epoch: string }>(
            `UPDATE ${leases} SET owner = $1, epoch = epoch + 1, expires_at = now() + $4 * interval '1 millisecond'
             WHERE ${free} AND lease IN (SELECT lease FROM ${leases} WHERE lease = ANY($2::text[]) AND ${free} ORDER BY random() LIMIT $3 FOR UPDATE SKIP LOCKED)
             RETURNING lease, epoch`,
            [owner, allLeases, fair - renewed.size, leaseMs],
          )
        ).rows,
      );
    }
    await client.query('COMMIT');
    // Fenced before owned; a lease whose fence could not be raised is not owned (and freed by the next round).
    const fenced = await Promise.all(
      [...taken].map(([shard, epoch]) =>
        (raiseFence?.({ lease: leaseName(shard), epoch }) ?? Promise.resolve()).then(
          () => true,
          () => false,
        ),
      ),
    );
    [...taken].forEach(([shard, epoch], index) => {
      if (fenced[index] === true) renewed.set(shard, epoch);
    });
    return renewed;
  };

  /** A round: what it found, and when it began (the database's expiry of each lease it holds is later than that plus `leaseMs`). */
  const round$ = defer(() => {
    const startedAt = scheduler.now();
    const mine = new Map(scheduler.now() < deadline ? held : []); // past its deadline, a lease is taken anew
    return onClient(pool, (client) => roundQueries(client, mine)).pipe(map((leasesHeld): Round => ({ startedAt, held: leasesHeld })));
  });

  let deadlineTimer = new Subscription();
  const apply = ({ startedAt, held: leasesHeld }: Round): void => {
    const until = startedAt + leaseMs - margin;
    if (closed || scheduler.now() >= until) return; // too late: the database may have let them go already
    const before = ownership();
    held.clear();
    for (const [shard, epoch] of leasesHeld) held.set(shard, epoch);
    deadline = until;
    deadlineTimer.unsubscribe();
    deadlineTimer = scheduler.schedule(() => drop([...held.keys()]), until - scheduler.now());
    if (ownership() !== before) changes$.next(owned());
  };

  try {
    await setUp();
    apply(await firstValueFrom(round$.pipe(timeout({ first: leaseMs, scheduler }))));
  } catch (error) {
    if (ownPool) await pool.end();
    throw error;
  }
  const rounds = timer(renewEveryMs, renewEveryMs, scheduler)
    .pipe(
      exhaustMap(() =>
        round$.pipe(
          timeout({ first: leaseMs, scheduler }),
          catchError(() => EMPTY),
        ),
      ),
    )
    .subscribe(apply);

  return {
    owner,
    shards,
    changes$: changes$.asObservable(),
    owns: (stream) => ownedEpoch(stream) !== undefined,
    fenceOf(stream) {
      const epoch = ownedEpoch(stream);
      return epoch === undefined ? undefined : { lease: leaseName(shardOf(stream, shards)), epoch };
    },
    owned,
    async close() {
      if (closed) return;
      closed = true;
      rounds.unsubscribe();
      deadlineTimer.unsubscribe();
      drop([...held.keys()]);
      changes$.complete();
      // Handed back so survivors take them at their next round, rather than after they expire; an
      // unreachable database lets them expire instead.
      const handBack$ = onClient(pool, (client) =>
        client.query(`WITH freed AS (UPDATE ${leases} SET owner = NULL, expires_at = NULL WHERE owner = $1) DELETE FROM ${members} WHERE owner = $1`, [owner]),
      );
      await firstValueFrom(
        handBack$.pipe(
          timeout({ first: leaseMs, scheduler }),
          catchError(() => EMPTY),
        ),
        { defaultValue: undefined },
      );
      if (ownPool) await pool.end();
    },
  };
}

/**
 * Runs `work` on a connection of the pool, given back after it; unsubscribed before `work` ends,
 * the connection is destroyed (its transaction, if any, ends with it), so a query stuck on a
 * partitioned connection holds nothing.
 */
function onClient<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Observable<T> {
  return new Observable<T>((subscriber) => {
    let client: pg.PoolClient | undefined;
    let abandoned = false;
    const release = (error?: Error): void => {
      if (client === undefined) return;
      client.off('error', ignore);
      client.release(error);
      client = undefined;
    };
    pool.connect().then(
      (connected) => {
        if (abandoned) return connected.release(new Error('shardLeases: abandoned'));
        client = connected;
        client.on('error', ignore); // a broken connection fails the query under way
        work(connected).then(
          (value) => {
            release();
            subscriber.next(value);
            subscriber.complete();
          },
          (error: unknown) => {
            release(error instanceof Error ? error : new Error(String(error)));
            subscriber.error(error);
          },
        );
      },
      (error: unknown) => subscriber.error(error),
    );
    return () => {
      abandoned = true;
      release(new Error('shardLeases: abandoned'));
    };
  });
}

/** Merges the defaults into the options and checks them, ws style: each error names its option. */
function checkOptions(options: unknown): Required<Omit<ShardLeasesOptions, 'connectionString' | 'pool' | 'raiseFence'>> & ShardLeasesOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw new TypeError(`shardLeases: the options must be an object, got ${shown(options)}`);
  for (const key of Object.keys(options)) {
    if (!(OPTION_NAMES as readonly string[]).includes(key))
      throw new TypeError(`shardLeases: unknown option "${key}"; the options are ${OPTION_NAMES.map((name) => `"${name}"`).join(', ')}`);
  }
  const given = options as ShardLeasesOptions;
  const {
    connectionString,
    pool,
    schema = 'runestream',
    owner = `process-${randomBytes(8).toString('hex')}`,
    shards = 64,
    leaseMs = 10_000,
    scheduler = asyncScheduler,
    raiseFence,
  } = given;
  if ((connectionString === undefined) === (pool === undefined)) throw new TypeError('shardLeases: give exactly one of the "connectionString" and "pool" options');
  if (connectionString !== undefined && (typeof connectionString !== 'string' || connectionString === '')) {
    throw new TypeError(`shardLeases: the "connectionString" option must be a non-empty string (a postgres:// URL), got ${shown(connectionString)}`);
  }
  if (pool !== undefined && (typeof pool !== 'object' || pool === null || typeof pool.connect !== 'function' || typeof pool.query !== 'function')) {
    throw new TypeError(`shardLeases: the "pool" option must be a pg Pool, got ${shown(pool)}`);
  }
  if (typeof schema !== 'string' || !/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new TypeError(`shardLeases: the "schema" option must be a lower-case SQL identifier (letters, digits, _; at most 63), got ${shown(schema)}`);
  }
  if (typeof owner !== 'string' || owner === '' || owner.length > MAX_OWNER_LENGTH) {
    throw new TypeError(`shardLeases: the "owner" option must be a string of 1 to ${MAX_OWNER_LENGTH} characters, got ${shown(owner)}`);
  }
  if (!Number.isInteger(shards) || shards < 1 || shards > MAX_SHARDS)
    throw new TypeError(`shardLeases: the "shards" option must be an integer from 1 to ${MAX_SHARDS}, got ${shown(shards)}`);
  if (!Number.isInteger(leaseMs) || leaseMs < MIN_LEASE_MS || leaseMs > MAX_LEASE_MS) {
    throw new TypeError(`shardLeases: the "leaseMs" option must be an integer from ${MIN_LEASE_MS} to ${MAX_LEASE_MS} (milliseconds), got ${shown(leaseMs)}`);
  }
  const { renewEveryMs = Math.floor(leaseMs / 3) } = given;
  if (!Number.isInteger(renewEveryMs) || renewEveryMs < MIN_RENEW_EVERY_MS || renewEveryMs > leaseMs / 2) {
    throw new TypeError(`shardLeases: the "renewEveryMs" option must be an integer from ${MIN_RENEW_EVERY_MS} to leaseMs / 2 (${leaseMs / 2}), got ${shown(renewEveryMs)}`);
  }
  if (typeof scheduler !== 'object' || scheduler === null || typeof scheduler.now !== 'function' || typeof scheduler.schedule !== 'function') {
    throw new TypeError(`shardLeases: the "scheduler" option must be an RxJS scheduler, got ${shown(scheduler)}`);
  }
  if (raiseFence !== undefined && typeof raiseFence !== 'function')
    throw new TypeError(`shardLeases: the "raiseFence" option must be a function (the store's raiseFence), got ${shown(raiseFence)}`);
  return { connectionString, pool, schema, owner, shards, leaseMs, renewEveryMs, scheduler, raiseFence };
}

const shown = (value: unknown): string => (typeof value === 'string' ? JSON.stringify(value) : String(value));
