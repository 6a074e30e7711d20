import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The local PostgreSQL of every development and CI machine. */
export const PG_URL = 'postgres://postgres@127.0.0.1:5432/test';

/** The URL of the same database through a proxy listening on `port` (see tcp-proxy.ts). */
export const pgUrlThrough = (port: number): string => `postgres://postgres@127.0.0.1:${port}/test`;

/**
 * A schema with a random name (`rs_test_<hex>`) for one test file, and a pool to look into it:
 * two test runs on one database never see each other's tables. `drop()` drops it and ends the pool.
 */
export function pgTestSchema(): { readonly schema: string; readonly pool: pg.Pool; drop(): Promise<void> } {
  const schema = `rs_test_${randomBytes(6).toString('hex')}`;
  const pool = new pg.Pool({ connectionString: PG_URL, max: 4 });
  return {
    schema,
    pool,
    async drop() {
      try {
        await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      } finally {
        await pool.end();
      }
    },
  };
}
