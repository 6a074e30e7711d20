import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Rune } from '../../src/index.js';
import { postgresStore, type PostgresStore, type PostgresStoreOptions } from '../../src/postgres.js';
import { StoreConflictError } from '../../src/streams/store.js';
import { runeOf, runesOf, storeContract } from '../../src/store-kit.js';
import { POSTGRES_URL, dropSchemas, postgresUrlVia, randomSchema } from '../support/postgres.js';
import { tcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

/** Every schema a test made, dropped after all of them. */
const schemas: string[] = [];
const stores: PostgresStore[] = [];
const clients: pg.Client[] = [];
const proxies: TcpProxy[] = [];

afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  for (const client of clients.splice(0)) await client.end().catch(() => {});
  for (const proxy of proxies.splice(0)) await proxy.close();
});
afterAll(() => dropSchemas(schemas));

/** A fresh schema's name, dropped after the file's tests. */
const freshSchema = (): string => {
  const schema = randomSchema();
  schemas.push(schema);
  return schema;
};

/** A store closed after the test, on a fresh schema unless one is given. */
const openStore = async (options: Partial<PostgresStoreOptions> = {}): Promise<PostgresStore> => {
  const store = await postgresStore({ connectionString: POSTGRES_URL, schema: options.schema ?? freshSchema(), ...options });
  stores.push(store);
  return store;
};

/** A raw connection, as another program would have one; ended after the test. */
const rawClient = async (connectionString = POSTGRES_URL): Promise<pg.Client> => {
  const client = new pg.Client({ connectionString });
  client.on('error', () => {});
  clients.push(client);
  await client.connect();
  return client;
};

storeContract('postgresStore', () => openStore(), { describe, it, expect }, { severalWriters: true, restore: true });
