import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Rune } from '../src/index.js';
import { postgresStore } from '../src/postgres.js';
import { BATCH, STREAMS, chatActorBatches } from './chat-actor-batches.js';
import { compareAsync, measureAsync, report } from './harness.js';

const DATABASE = 'postgres://postgres@127.0.0.1:5432/test';

/** The placeholders of a multi-row VALUES list: `rows` rows of `columns` parameters. */
const valuesList = (rows: number, columns: number): string =>
  Array.from({ length: rows }, (_, r) => `(${Array.from({ length: columns }, (_, c) => `$${r * columns + c + 1}`).join(', ')})`).join(', ');

/**
 * Issue 15's bar: durable appends through `postgresStore.append`, one batch of 100 chatActor runes
 * over 10 streams per call, against raw `pg` inserting the same rows (the same columns, into a copy
 * of the store's own `rs_runes` table, its indexes included) with one multi-row INSERT in one
 * transaction per batch: at least 0.7x. Both commit durably (`synchronous_commit` on). The store's
 * extra work is what lets several processes share the log: the expected-seq UPDATE of each
 * stream's row, the positions drawn under the advisory lock, and the NOTIFY.
 */
export async function benchPostgresAppend(): Promise<boolean> {
  const schema = `rs_bench_${randomBytes(6).toString('hex')}`;
  const store = await postgresStore({ connectionString: DATABASE, schema });
  const pool = new pg.Pool({ connectionString: DATABASE, max: 1 });
  try {
    await pool.query(`CREATE TABLE "${schema}".raw_runes (LIKE "${schema}".rs_runes INCLUDING ALL)`);
    const columns = 9;
    const insert = `INSERT INTO "${schema}".raw_runes (stream, seq, machine, kind, event, from_state, to_state, at, payload) VALUES ${valuesList(BATCH, columns)}`;
    const insertBatch = async (runes: readonly Rune[]): Promise<void> => {
      const values: unknown[] = [];
      for (const r of runes)
        values.push(
          r.stream,
          r.seq,
          r.machine,
          r.kind,
          JSON.stringify(r.event),
          r.from ?? null,
          r.to ?? null,
          r.at,
          r.payload === undefined ? null : JSON.stringify(r.payload),
        );
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query(insert, values);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    };
    const nextForStore = chatActorBatches();
    const nextForRaw = chatActorBatches();

    const [ours, theirs] = await compareAsync(
      10,
      () => measureAsync('runestream postgresStore.append (runes/s)', BATCH, () => store.append(nextForStore()), 250),
      () => measureAsync('raw pg multi-row INSERT, 1 tx per batch', BATCH, () => insertBatch(nextForRaw()), 250),
    );

    // Same rows: the first runes of both tables must be identical.
    const first = (table: string) =>
      pool.query(`SELECT stream, seq, machine, kind, event, from_state, to_state, at, payload FROM "${schema}".${table} WHERE seq <= 50 ORDER BY stream, seq`);
    if (JSON.stringify((await first('rs_runes')).rows) !== JSON.stringify((await first('raw_runes')).rows)) {
      throw new Error('the store and the raw inserts did not write the same rows');
    }

    const ok = report(`postgresStore: durable appends, batches of ${BATCH} chatActor runes over ${STREAMS} streams`, ours, theirs, 0.7);
    console.log(`  ratio ${(ours.rate / theirs.rate).toFixed(2)} exactly`);
    return ok;
  } finally {
    await store.close();
    await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    await pool.end();
  }
}
