import pg from 'pg';
import { asyncScheduler, type SchedulerLike, type Subscription } from 'rxjs';
import type { Rune } from '../../reducers/rune.js';
import {
  StoreError,
  checkBatch,
  checkRestore,
  openState,
  prunePastSnapshot,
  type AppendOptions,
  type Fence,
  type HeadsQuery,
  type RuneStore,
  type Snapshot,
  type StreamHeadRow,
  type TailListener,
  headFromRow,
} from '../store.js';
import { availabilityTracker } from '../diagnostics.js';
import { isConnectionError, storeErrorOf } from './postgres-errors.js';
import { PostgresTail } from './postgres-tail.js';
import { RUNE_COLUMNS, runeColumns, runeFromRow, streamsOf, type RuneRow } from './rune-rows.js';
import { checkIdentifier, migrate, quoted } from './schema.js';

/** Options of {@link postgresStore}; one of `connectionString` and `pool` is required. */
export interface PostgresStoreOptions {
  /** Where the database is (`postgres://user@host:5432/db`): the store opens its own pool, and ends it at `close()`. */
  readonly connectionString?: string;
  /** A pool the caller owns instead: the store uses it and leaves it open at `close()`. */
  readonly pool?: pg.Pool;
  /** The PostgreSQL schema of the store's tables: 1 to 60 of a-z, 0-9 and _. Default `'runestream'`. */
  readonly schema?: string;
  /** The NOTIFY channel the appends signal on and the tail listens to. Default `rs_<schema>`. */
  readonly channel?: string;
  /** How often, in ms, the tail catches up even when no notification came (a backstop). Default 1000. */
  readonly pollMs?: number;
  /** The scheduler the tail's poll and reconnect delays run on. Default rxjs's `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
  /** The most runes one append may carry; a bigger batch is refused with code `batch_too_large`. Default 10,000. */
  readonly maxBatchRunes?: number;
  /** Rows per query of `read`, `readEvents`, `heads` and the tail's catch-up. Default 1,000. */
  readonly pageSize?: number;
  /**
   * How long, in ms, a statement (an append, a read) waits for the database before its connection
   * is dropped and the call rejects with code `unavailable`: a network partition fails calls
   * instead of holding them. Default 30,000.
   */
  readonly queryTimeoutMs?: number;
}

/** Where a listener of {@link PostgresStore.tail} starts. */
export interface PostgresTailStart {
  /** Hear the runes after this position (one a listener was given), instead of from the log's end. */
  readonly afterPosition?: number;
}

/** A {@link RuneStore} on PostgreSQL that several processes share: it tails, fences and restores. */
export interface PostgresStore extends RuneStore {
  /** The schema its tables are in. */
  readonly schema: string;
  tail(listener: TailListener, start?: PostgresTailStart): () => void;
  raiseFence(fence: Fence): Promise<void>;
  restore(runes: readonly Rune[]): Promise<number>;
  /**
   * Runs the tail's catch-up now and waits for it (it also runs on each notification, after each
   * reconnect and every `pollMs`): resolves to the position the listeners have heard through, or
   * `undefined` when none listens.
   */
  catchUp(): Promise<number | undefined>;
}

export const POSTGRES_DEFAULTS = { schema: 'runestream', pollMs: 1000, maxBatchRunes: 10_000, pageSize: 1000, queryTimeoutMs: 30_000 } as const;

const ignore = (): void => {};

/** A positive integer option, or a TypeError naming it. */
function positiveInteger(option: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new TypeError(`postgresStore: "${option}" must be a positive integer, got ${value}`);
  return value;
}

const HEAD_COLUMNS = 'stream, machine, last_seq::float8 AS seq, value, at';

/**
 * A store on PostgreSQL (through `pg`) that several server processes share: each batch is one
 * transaction, acknowledged after its commit; each stream's expected seq is checked under its row
 * lock, so writers in different processes never leave a gap or a duplicate; `tail` hears every
 * process's runes in position order, never skipping one committed out of order; appends carry
 * fences. Opening creates its tables in `schema` (migrating them under an advisory lock), and
 * refuses a schema of another application or of a newer version with `StoreError`
 * `invalid_database`, touching nothing.
 *
 * ## Example
 * ```ts
 * import assert from 'node:assert/strict';
 * import { randomBytes } from 'node:crypto';
 * import pg from 'pg';
 * import { createEngine } from 'runestream';
 * import { postgresStore } from 'runestream/postgres';
 *
 * const pool = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:5432/test' });
 * const schema = `rs_test_${randomBytes(6).toString('hex')}`;
 * const store = await postgresStore({ pool, schema });
 * const engine = createEngine({ store, followStore: true });
 * await engine.spawn('chat-1', 'chat-actor');
 * await engine.dispatch('chat-1', { type: 'Pause', reason: 'lunch' });
 * assert.equal((await store.head('chat-1'))?.seq, 2);
 * await engine.close(); // closes the store, which leaves the caller's pool open
 * await pool.query(`DROP SCHEMA ${schema} CASCADE`);
 * await pool.end();
 * ```
 */
export async function postgresStore(options: PostgresStoreOptions): Promise<PostgresStore> {
  const {
    connectionString,
    pool: callerPool,
    schema = POSTGRES_DEFAULTS.schema,
    pollMs = POSTGRES_DEFAULTS.pollMs,
    scheduler = asyncScheduler,
    maxBatchRunes = POSTGRES_DEFAULTS.maxBatchRunes,
    pageSize = POSTGRES_DEFAULTS.pageSize,
    queryTimeoutMs = POSTGRES_DEFAULTS.queryTimeoutMs,
  } = options;
  if ((connectionString === undefined) === (callerPool === undefined)) {
    throw new TypeError('postgresStore: exactly one of "connectionString" and "pool" is required');
  }
  checkIdentifier('schema', schema);
  const channel = checkIdentifier('channel', options.channel ?? `rs_${schema}`);
  if (!Number.isFinite(pollMs) || pollMs <= 0) throw new TypeError(`postgresStore: "pollMs" must be a positive number of ms, got ${pollMs}`);
  positiveInteger('maxBatchRunes', maxBatchRunes);
  positiveInteger('pageSize', pageSize);
  positiveInteger('queryTimeoutMs', queryTimeoutMs);

  const pool = callerPool ?? new pg.Pool({ connectionString, connectionTimeoutMillis: queryTimeoutMs });
  // An idle connection the server dropped: the pool discards it, and the next query opens another.
  if (callerPool === undefined) pool.on('error', () => {});
  try {
    const client = await pool.connect();
    try {
      await migrate(client, schema);
    } finally {
      client.release();
    }
  } catch (error) {
    if (callerPool === undefined) await pool.end();
    throw storeErrorOf(error, 'opening the store');
  }

  const q = quoted(schema);
  const { open, close } = openState();
  const availability = availabilityTracker(`postgres schema ${schema}`);
  const tail = new PostgresTail({ pool, connection: callerPool === undefined ? { connectionString } : pool.options, schema: q, channel, pollMs, scheduler, pageSize });
  /** Appends run one at a time: a listener hears them in the order they were made. */
  let appends: Promise<unknown> = Promise.resolve();

  /**
   * Runs one statement on a pooled connection. One the database does not answer within
   * `queryTimeoutMs` (a network partition) is dropped, so the call rejects with `unavailable`
   * instead of waiting for TCP to give up, and the pool opens a new connection for the next.
   */
  const query = async <Row extends pg.QueryResultRow>(doing: string, text: string, values?: unknown[]): Promise<Row[]> => {
    let client: pg.PoolClient | undefined;
    let failed: Error | undefined;
    let deadline: Subscription | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      deadline = scheduler.schedule(() => {
        failed = Object.assign(new Error(`no answer within queryTimeoutMs (${queryTimeoutMs} ms)`), { code: 'ETIMEDOUT' });
        (client as unknown as pg.Client | undefined)?.connection.stream.destroy();
        reject(failed);
      }, queryTimeoutMs);
    });
    const attempt = (async () => {
      const connected = await pool.connect();
      if (failed !== undefined) {
        connected.release(failed); // connected after the deadline: dropped
        throw failed;
      }
      client = connected;
      // A lost connection fails the query; its error event, with no one else listening, must not crash the process.
      connected.on('error', ignore);
      try {
        return (await connected.query<Row>(text, values)).rows;
      } catch (error) {
        if (failed === undefined && isConnectionError(error)) failed = error as Error;
        throw error;
      } finally {
        connected.off('error', ignore);
        connected.release(failed);
      }
    })();
    attempt.catch(ignore); // when the deadline won the race
    try {
      const rows = await Promise.race([attempt, timedOut]);
      availability.succeeded();
      return rows;
    } catch (error) {
      const storeError = storeErrorOf(failed ?? error, doing);
      if (storeError.code === 'unavailable') availability.failed(storeError.message);
      else availability.succeeded(); // the database answered, if only to refuse
      throw storeError;
    } finally {
      deadline!.unsubscribe();
    }
  };

  /** The conflict a batch whose runes of a stream are not consecutive meets: checked against the heads, as every store does. */
  const refuseBatch = async (runes: readonly Rune[]): Promise<never> => {
    const rows = await query<{ stream: string; seq: number }>('an append', `SELECT stream, last_seq::float8 AS seq FROM ${q}.rs_streams WHERE stream = ANY($1)`, [
      [...new Set(runes.map((r) => r.stream))],
    ]);
    const heads = new Map(rows.map((row) => [row.stream, row.seq]));
    checkBatch(runes, (stream) => heads.get(stream) ?? 0);
    throw new Error('unreachable: a batch with a stream not consecutive passed checkBatch');
  };

  const commit = async (runes: readonly Rune[], options: AppendOptions | undefined, streams: unknown[]): Promise<void> => {
    open();
    await tail.started();
    const fences = options?.fences ?? [];
    const [row] = await query<{ last: number }>(
      'an append',
      `SELECT ${q}.rs_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)::float8 AS last`,
      [channel, fences.map((f) => f.lease), fences.map((f) => f.epoch), ...streams, ...runeColumns(runes), options?.writer ?? null],
    );
    if (tail.active) await tail.delivered(row!.last);
  };

  // The next page starts after the last seq read, not after as many as were read: a pruned
  // stream's first page starts later than `afterSeq + 1`.
  const page = async <T extends { seq: number }>(read: (after: number, limit: number) => Promise<T[]>, afterSeq: number, limit: number): Promise<T[]> => {
    const all: T[] = [];
    for (let after = afterSeq; all.length < limit; ) {
      const want = Math.min(pageSize, limit - all.length);
      const got = await read(after, want);
      all.push(...got);
      if (got.length < want) break;
      after = got[got.length - 1]!.seq;
    }
    return all;
  };

  const store: PostgresStore = {
    schema,
    async append(runes, options) {
      open();
      if (runes.length === 0) return;
      if (runes.length > maxBatchRunes) {
        throw new StoreError('batch_too_large', `postgresStore: a batch of ${runes.length} runes is over maxBatchRunes (${maxBatchRunes}); nothing of it was written`);
      }
      const streams = streamsOf(runes);
      if (streams === undefined) return refuseBatch(runes);
      const run = appends.then(() => commit(runes, options, streams));
      appends = run.catch(() => {});
      return run;
    },
    tail(listener, start) {
      open();
      return tail.add(listener, start?.afterPosition);
    },
    async catchUp() {
      open();
      return tail.catchUp();
    },
    async raiseFence(fence) {
      open();
      await query(
        'raising a fence',
        `INSERT INTO ${q}.rs_fences AS f (lease, epoch) VALUES ($1, $2) ON CONFLICT (lease) DO UPDATE SET epoch = greatest(f.epoch, excluded.epoch)`,
        [fence.lease, fence.epoch],
      );
    },
    async head(stream) {
      open();
      const [row] = await query<StreamHeadRow>('reading a head', `SELECT ${HEAD_COLUMNS} FROM ${q}.rs_streams WHERE stream = $1`, [stream]);
      return row === undefined ? undefined : headFromRow(row);
    },
    async *heads(headsQuery: HeadsQuery = {}) {
      open();
      const { machine = null, values = null, prefix = null } = headsQuery;
      let after: string | null = null;
      for (;;) {
        const rows: StreamHeadRow[] = await query<StreamHeadRow>(
          'listing heads',
          `SELECT ${HEAD_COLUMNS} FROM ${q}.rs_streams
           WHERE ($1::text IS NULL OR stream > $1) AND ($2::text IS NULL OR machine = $2) AND ($3::text[] IS NULL OR value = ANY($3))
             AND ($4::text IS NULL OR (stream >= $4 AND starts_with(stream, $4)))
           ORDER BY stream LIMIT $5`,
          [after, machine, values, prefix, pageSize],
        );
        for (const row of rows) yield headFromRow(row);
        if (rows.length < pageSize) return;
        after = rows[rows.length - 1]!.stream;
        open();
      }
    },
    async read(stream, afterSeq = 0, limit = Infinity) {
      open();
      return page(
        async (after, want) =>
          (await query<RuneRow>('reading runes', `SELECT ${RUNE_COLUMNS} FROM ${q}.rs_runes WHERE stream = $1 AND seq > $2 ORDER BY seq LIMIT $3`, [stream, after, want])).map(
            runeFromRow,
          ),
        afterSeq,
        limit,
      );
    },
    async readEvents(stream, afterSeq = 0, limit = Infinity) {
      open();
      const rows = await page(
        (after, want) =>
          query<{ seq: number; event: Rune['event'] }>(
            'reading events',
            `SELECT seq::float8 AS seq, event FROM ${q}.rs_runes WHERE stream = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
            [stream, after, want],
          ),
        afterSeq,
        limit,
      );
      return rows.map((row) => row.event);
    },
    async latestSnapshot(stream) {
      open();
      const [row] = await query<{ seq: number; state: unknown; v: number | null }>(
        'reading a snapshot',
        `SELECT seq::float8 AS seq, state, v FROM ${q}.rs_snapshots WHERE stream = $1`,
        [stream],
      );
      if (row === undefined) return undefined;
      const snapshot: Snapshot = { stream, seq: row.seq, state: row.state };
      return row.v === null ? snapshot : { ...snapshot, v: row.v };
    },
    async saveSnapshot(snapshot) {
      open();
      const head = await store.head(snapshot.stream);
      if (head === undefined) throw new StoreError('unknown_stream', `stream "${snapshot.stream}" has no runes to snapshot`);
      if (snapshot.seq > head.seq) throw new StoreError('unknown_stream', `stream "${snapshot.stream}" has no seq ${snapshot.seq} yet`);
      await query(
        'saving a snapshot',
        `INSERT INTO ${q}.rs_snapshots AS s (stream, seq, state, v) VALUES ($1, $2, $3::jsonb, $4)
         ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq, state = excluded.state, v = excluded.v WHERE s.seq <= excluded.seq`,
        [snapshot.stream, snapshot.seq, JSON.stringify(snapshot.state) ?? 'null', snapshot.v ?? null],
      );
    },
    async prune(stream, throughSeq) {
      open();
      const [row] = await query<{ covered: number | null }>(
        'pruning',
        `SELECT (SELECT seq::float8 FROM ${q}.rs_snapshots WHERE stream = $1) AS covered FROM ${q}.rs_streams WHERE stream = $1`,
        [stream],
      );
      if (row === undefined) return 0;
      const covered = row.covered ?? 0;
      if (throughSeq > covered) throw prunePastSnapshot(stream, throughSeq, covered);
      const [deleted] = await query<{ count: number }>(
        'pruning',
        `WITH gone AS (DELETE FROM ${q}.rs_runes WHERE stream = $1 AND seq <= $2 RETURNING 1) SELECT count(*)::float8 AS count FROM gone`,
        [stream, throughSeq],
      );
      return deleted!.count;
    },
    async restore(runes) {
      open();
      const first = runes[0];
      if (first === undefined) return 0;
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (error) {
        throw storeErrorOf(error, 'a restore');
      }
      try {
        await client.query('BEGIN');
        const [head] = (await client.query<StreamHeadRow>(`SELECT ${HEAD_COLUMNS} FROM ${q}.rs_streams WHERE stream = $1 FOR UPDATE`, [first.stream])).rows;
        const [oldest] = (await client.query<{ seq: number | null }>(`SELECT min(seq)::float8 AS seq FROM ${q}.rs_runes WHERE stream = $1`, [first.stream])).rows;
        checkRestore(runes, head === undefined ? undefined : headFromRow(head), oldest?.seq ?? (head?.seq ?? 0) + 1);
        await client.query(
          `INSERT INTO ${q}.rs_runes (stream, seq, machine, kind, event, from_state, to_state, at, payload, v, origin, restored)
           SELECT s, n, m, k, e::jsonb, f, t, a, p::jsonb, w, o::jsonb, true
           FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::float8[], $9::text[], $10::integer[], $11::text[]) AS r(s, n, m, k, e, f, t, a, p, w, o)`,
          runeColumns(runes),
        );
        await client.query('COMMIT');
        client.release();
        return runes.length;
      } catch (error) {
        if (isConnectionError(error)) client.release(error as Error);
        else await client.query('ROLLBACK').finally(() => client.release());
        throw storeErrorOf(error, 'a restore');
      }
    },
    async close() {
      if (!close()) return;
      await tail.close(); // first: an append waiting for its runes' delivery stops waiting
      await appends;
      if (callerPool === undefined) await pool.end();
    },
  };
  return store;
}
