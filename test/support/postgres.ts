import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The PostgreSQL every development and CI machine of this project runs (trust auth). */
export const POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';

/** The same database through a proxy on `port` (see tcp-proxy.ts). */
export const postgresUrlVia = (port: number): string => `postgres://postgres@127.0.0.1:${port}/test`;

/** A schema name no other test (of this run or of another running at once) uses. */
export const randomSchema = (): string => `rs_test_${randomBytes(6).toString('hex')}`;

/** Drops schemas with everything in them, on a connection of its own. */
export async function dropSchemas(schemas: readonly string[]): Promise<void> {
  if (schemas.length === 0) return;
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
