import pg from 'pg';
import { POSTGRES_URL, randomSchema } from './postgres.js';

/**
 * A schema with a random name (`rs_test_<hex>`) for one test file, and a pool to look into it:
 * two test runs on one database never see each other's tables. `drop()` drops it and ends the pool.
 */
export function pgTestSchema(): { readonly schema: string; readonly pool: pg.Pool; drop(): Promise<void> } {
  const schema = randomSchema();
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4 });
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
