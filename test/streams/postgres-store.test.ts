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

/** Waits until `done()` holds, looking at each turn of the event loop's timers (a generous timeout, never a duration asserted). */
async function until(done: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** What a listener heard, as `stream:seq`, with the positions. */
function recorder() {
  const heard: string[] = [];
  const positions: number[] = [];
  const listener = (rune: Rune, position: number) => {
    heard.push(`${rune.stream}:${rune.seq}`);
    positions.push(position);
  };
  return { heard, positions, listener };
}

describe('postgresStore: options', () => {
  it('refuses options it cannot use, naming them', async () => {
    await expect(postgresStore({ schema: 'x' })).rejects.toThrow('exactly one of "connectionString" and "pool" is required');
    const pool = new pg.Pool({ connectionString: POSTGRES_URL });
    await expect(postgresStore({ connectionString: POSTGRES_URL, pool })).rejects.toThrow('exactly one of');
    await pool.end();
    await expect(postgresStore({ connectionString: POSTGRES_URL, schema: 'Bad-Name' })).rejects.toThrow('"schema" must be 1 to 60 of a-z, 0-9 and _');
    await expect(postgresStore({ connectionString: POSTGRES_URL, schema: 'ok', channel: 'no way' })).rejects.toThrow('"channel" must be');
    await expect(postgresStore({ connectionString: POSTGRES_URL, pageSize: 0 })).rejects.toThrow('"pageSize" must be a positive integer, got 0');
    await expect(postgresStore({ connectionString: POSTGRES_URL, pollMs: -1 })).rejects.toThrow('"pollMs" must be a positive number');
  });

  it('uses a pool the caller owns and leaves it open at close', async () => {
    const pool = new pg.Pool({ connectionString: POSTGRES_URL });
    try {
      const store = await postgresStore({ pool, schema: freshSchema() });
      await store.append(runesOf('a', 1, 2));
      await store.close();
      expect((await pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await pool.end();
    }
  });

  it('refuses a batch over maxBatchRunes with code batch_too_large, writing nothing', async () => {
    const store = await openStore({ maxBatchRunes: 5 });
    await expect(store.append(runesOf('a', 1, 6))).rejects.toMatchObject({ code: 'batch_too_large' });
    expect(await store.head('a')).toBeUndefined();
    await store.append(runesOf('a', 1, 5));
    expect((await store.read('a')).length).toBe(5);
  });

  it('refuses a rune jsonb cannot hold (a NUL character) with code invalid_rune, writing nothing of its batch', async () => {
    const store = await openStore();
    const nul: Rune = { ...runeOf('b', 1), event: { type: 'spawn', input: { text: 'a\u0000b' } } };
    await expect(store.append([runeOf('a', 1), nul])).rejects.toMatchObject({ code: 'invalid_rune', message: expect.stringContaining('jsonb takes no NUL character') });
    expect(await store.head('a')).toBeUndefined();
  });

  it('pages reads and heads by pageSize, giving the same as one page', async () => {
    const store = await openStore({ pageSize: 3 });
    await store.append([...runesOf('a', 1, 10), ...['s1', 's2', 's3', 's4', 's5'].map((s) => runeOf(s, 1))]);
    expect(await store.read('a')).toEqual(runesOf('a', 1, 10));
    expect(await store.read('a', 2, 7)).toEqual(runesOf('a', 3, 7));
    expect((await store.readEvents('a', 4)).length).toBe(6);
    const listed: string[] = [];
    for await (const head of store.heads()) listed.push(head.stream);
    expect(listed).toEqual(['a', 's1', 's2', 's3', 's4', 's5']);
  });

  it('pages a pruned stream from its first stored rune: each rune once, read from before the cut', async () => {
    const store = await openStore({ pageSize: 3 });
    await store.append(runesOf('a', 1, 12));
    await store.saveSnapshot({ stream: 'a', seq: 5, state: { value: 'x' } });
    await store.prune('a', 5);
    expect(await store.read('a')).toEqual(runesOf('a', 6, 7));
    expect((await store.readEvents('a')).length).toBe(7);
  });
});

describe('postgresStore: the schema', () => {
  it('creates its tables, marked as runestream version 2; two stores opening at once both migrate safely', async () => {
    const schema = freshSchema();
    const [first, second] = await Promise.all([openStore({ schema }), openStore({ schema })]);
    await first!.append(runesOf('a', 1, 2));
    expect(await second!.read('a')).toEqual(runesOf('a', 1, 2));
    const raw = await rawClient();
    const tables = (await raw.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, [schema])).rows.map((r) => r.table_name);
    expect(tables).toEqual(['rs_fences', 'rs_meta', 'rs_runes', 'rs_snapshots', 'rs_streams']);
    expect((await raw.query(`SELECT app, schema_version FROM "${schema}".rs_meta`)).rows).toEqual([{ app: 'runestream', schema_version: 2 }]);
  });

  it("refuses a schema holding another application's tables, and leaves them untouched", async () => {
    const schema = freshSchema();
    const raw = await rawClient();
    await raw.query(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".accounts (id int); INSERT INTO "${schema}".accounts VALUES (7)`);
    await expect(postgresStore({ connectionString: POSTGRES_URL, schema })).rejects.toMatchObject({
      name: 'StoreError',
      code: 'invalid_database',
      message: `PostgreSQL schema "${schema}" is not a runestream schema this code reads: it has tables (accounts) but no rs_meta; nothing was changed`,
    });
    await raw.query(`CREATE TABLE "${schema}".rs_meta (app text, schema_version int); INSERT INTO "${schema}".rs_meta VALUES ('ledger', 1)`);
    await expect(postgresStore({ connectionString: POSTGRES_URL, schema })).rejects.toThrow('rs_meta names the application "ledger"');
    const tables = (await raw.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, [schema])).rows.map((r) => r.table_name);
    expect(tables).toEqual(['accounts', 'rs_meta']);
    expect((await raw.query(`SELECT id FROM "${schema}".accounts`)).rows).toEqual([{ id: 7 }]);
  });

  it("upgrades a version 1 schema in place, keeping its runes; a process still on version 1's append goes on appending", async () => {
    const schema = freshSchema();
    const store = await postgresStore({ connectionString: POSTGRES_URL, schema });
    await store.append(runesOf('a', 1, 3));
    await store.close();
    // What version 1 made: no rune version or origin column, only its own append, marked version 1.
    const raw = await rawClient();
    const v1Append = `"${schema}".rs_append(text, text[], double precision[], text[], bigint[], bigint[], text[], text[], double precision[], text[], bigint[], text[], text[], text[], text[], text[], double precision[], text[]`;
    await raw.query(
      `ALTER TABLE "${schema}".rs_runes DROP COLUMN v; ALTER TABLE "${schema}".rs_runes DROP COLUMN origin; ALTER TABLE "${schema}".rs_snapshots DROP COLUMN v; DROP FUNCTION ${v1Append}, integer[], text[], text); UPDATE "${schema}".rs_meta SET schema_version = 1`,
    );
    const upgraded = await openStore({ schema });
    expect((await raw.query(`SELECT schema_version FROM "${schema}".rs_meta`)).rows).toEqual([{ schema_version: 2 }]);
    expect(await upgraded.read('a')).toEqual(runesOf('a', 1, 3));
    await upgraded.append([{ ...runeOf('a', 4), v: 2, origin: { by: 'epic', epic: 'counting' } }]);
    // An older process's append, as version 1 called it: its rune has no version (version 1) and no origin.
    const r5 = runeOf('a', 5);
    await raw.query(`SELECT "${schema}".rs_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`, [
      'rs_older',
      [],
      [],
      ['a'],
      [4],
      [5],
      ['counter'],
      ['idle'],
      [r5.at],
      ['a'],
      [5],
      ['counter'],
      [r5.kind],
      [JSON.stringify(r5.event)],
      [r5.from],
      [r5.to],
      [r5.at],
      [null],
      null,
    ]);
    expect(await upgraded.read('a', 3)).toEqual([{ ...runeOf('a', 4), v: 2, origin: { by: 'epic', epic: 'counting' } }, r5]);
  });

  it('refuses a newer schema version, and leaves the schema untouched', async () => {
    const schema = freshSchema();
    const store = await postgresStore({ connectionString: POSTGRES_URL, schema });
    await store.append(runesOf('a', 1, 3));
    await store.close();
    const raw = await rawClient();
    await raw.query(`UPDATE "${schema}".rs_meta SET schema_version = 3`);
    await expect(postgresStore({ connectionString: POSTGRES_URL, schema })).rejects.toMatchObject({
      code: 'invalid_database',
      message: `PostgreSQL schema "${schema}" is not a runestream schema this code reads: its schema version is 3, newer than 2, the newest this code knows; nothing was changed`,
    });
    expect((await raw.query(`SELECT schema_version FROM "${schema}".rs_meta`)).rows).toEqual([{ schema_version: 3 }]);
    expect((await raw.query(`SELECT count(*)::int AS n FROM "${schema}".rs_runes`)).rows).toEqual([{ n: 3 }]);
  });
});

describe('postgresStore: several processes on one schema', () => {
  it('interleaves two stores (two pools) appending to the same streams: each seq once, the loser of a race refused, every tail hearing every rune once in seq order', async () => {
    const schema = freshSchema();
    const a = await openStore({ schema });
    const b = await openStore({ schema });
    const byA = recorder();
    const byB = recorder();
    a.tail(byA.listener);
    b.tail(byB.listener);
    await Promise.all([a.catchUp(), b.catchUp()]);

    await a.append([runeOf('s', 1), runeOf('t', 1)], { writer: 'A' });
    // Both read head 1; A commits first, B's batch is refused whole (its other stream too).
    await b.append([runeOf('s', 2)], { writer: 'B' });
    await expect(a.append([runeOf('t', 2), runeOf('s', 2)], { writer: 'A' })).rejects.toMatchObject({ code: 'seq_conflict', stream: 's', expectedSeq: 3, gotSeq: 2 });
    expect(await a.head('t')).toMatchObject({ seq: 1 });

    // Then both write as fast as they can, each retrying after the head it missed.
    const writer = async (store: PostgresStore, name: string, count: number): Promise<number> => {
      let conflicts = 0;
      for (let written = 0; written < count; ) {
        const stream = written % 2 === 0 ? 's' : 't';
        const head = (await store.head(stream))!.seq;
        try {
          await store.append([runeOf(stream, head + 1)], { writer: name });
          written++;
        } catch (error) {
          expect(error).toBeInstanceOf(StoreConflictError);
          conflicts++;
        }
      }
      return conflicts;
    };
    await Promise.all([writer(a, 'A', 30), writer(b, 'B', 30)]);
    await Promise.all([a.catchUp(), b.catchUp()]);

    const expected = (await a.read('s')).length + (await a.read('t')).length;
    expect(expected).toBe(3 + 60);
    for (const { heard, positions } of [byA, byB]) {
      expect(heard).toHaveLength(expected);
      for (const stream of ['s', 't']) {
        const seqs = heard.filter((h) => h.startsWith(`${stream}:`)).map((h) => Number(h.slice(2)));
        expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
      }
      expect(positions.every((p, i) => i === 0 || p > positions[i - 1]!)).toBe(true);
    }
    expect(byB.heard).toEqual(byA.heard); // one order for every process
  });

  it('never lets a global reader skip a rune committed out of order: a transaction held open across a later commit holds the tail back', async () => {
    const schema = freshSchema();
    const reader = await openStore({ schema, pollMs: 3_600_000 });
    const writer = await openStore({ schema });
    const { heard, positions, listener } = recorder();
    reader.tail(listener);
    await reader.catchUp();

    // Another program's transaction takes the lower position and stays open...
    const raw = await rawClient();
    await raw.query('BEGIN');
    await raw.query(`INSERT INTO "${schema}".rs_streams (stream, machine, last_seq, value, at) VALUES ('held', 'counter', 1, 'idle', 1)`);
    const held = (
      await raw.query(
        `INSERT INTO "${schema}".rs_runes (stream, seq, machine, kind, event, to_state, at) VALUES ('held', 1, 'counter', 'spawned', '{"type":"spawn","input":{"n":1}}', 'idle', 1) RETURNING gpos::float8 AS gpos`,
      )
    ).rows[0].gpos as number;
    // ...while a later batch commits with a higher one.
    await writer.append(runesOf('later', 1, 2));
    const later = await writer.read('later');
    expect(later).toHaveLength(2);

    expect(await reader.catchUp()).toBeLessThan(held);
    expect(heard).toEqual([]); // not past the open transaction: a reader that went on would never see `held`

    await raw.query('COMMIT');
    await reader.catchUp();
    expect(heard).toEqual(['held:1', 'later:1', 'later:2']);
    expect(positions[0]).toBe(held);
    expect(positions.every((p, i) => i === 0 || p > positions[i - 1]!)).toBe(true);
    expect((await reader.read('held'))[0]).toEqual(runeOf('held', 1));
  });

  it('delivers a rune held back by a transaction that sends no notification once it ends, without waiting for the poll', async () => {
    const schema = freshSchema();
    const reader = await openStore({ schema, pollMs: 3_600_000 });
    const writer = await openStore({ schema });
    const { heard, listener } = recorder();
    reader.tail(listener);
    await reader.catchUp();
    // Another program's transaction with a transaction id (a lease round, say), open across a commit of runes.
    const raw = await rawClient();
    await raw.query(`CREATE TABLE "${schema}".scratch (n int)`);
    await raw.query('BEGIN');
    await raw.query(`INSERT INTO "${schema}".scratch VALUES (1)`);
    await writer.append(runesOf('later', 1, 2)); // its NOTIFY finds the rune held back
    await reader.catchUp();
    expect(heard).toEqual([]);
    await raw.query('COMMIT'); // no NOTIFY: the tail must look again by itself
    await until(() => heard.length === 2, 'the held runes');
    expect(heard).toEqual(['later:1', 'later:2']);
  });

  it('resumes a listener after a position it heard (afterPosition), hearing exactly the runes after it', async () => {
    const store = await openStore();
    const first = recorder();
    const stop = store.tail(first.listener);
    await store.append(runesOf('a', 1, 3));
    stop();
    await store.append(runesOf('a', 4, 2));
    const again = recorder();
    store.tail(again.listener, { afterPosition: first.positions[1]! });
    await store.append(runesOf('a', 6, 1));
    expect(first.heard).toEqual(['a:1', 'a:2', 'a:3']);
    expect(again.heard).toEqual(['a:3', 'a:4', 'a:5', 'a:6']);
  });

  it('sends NOTIFY a pointer only: a rune of ~100 KB is appended and a raw LISTEN client hears its short position', async () => {
    const schema = freshSchema();
    const store = await openStore({ schema });
    const raw = await rawClient();
    const payloads: string[] = [];
    raw.on('notification', (n) => payloads.push(n.payload ?? ''));
    await raw.query(`LISTEN "rs_${schema}"`);
    const { positions, listener } = recorder();
    store.tail(listener);
    const big: Rune = { ...runeOf('big', 1), event: { type: 'spawn', input: { text: 'x'.repeat(100_000) } } };
    await store.append([big]);
    await until(() => payloads.length === 1, 'the notification');
    expect(payloads[0]).toMatch(/^\d{1,19}$/);
    expect(Number(payloads[0])).toBe(positions[0]);
    expect(await store.read('big')).toEqual([big]);
  });
});

describe('postgresStore: lost connections', () => {
  it('fails a batch whose connection is lost mid-way with code unavailable, writes nothing of it, and works again after', async () => {
    const proxy = await tcpProxy();
    proxies.push(proxy);
    const store = await openStore({ connectionString: postgresUrlVia(proxy.port) });
    const direct = await openStore({ schema: store.schema });
    await store.append(runesOf('a', 1, 2));

    proxy.hold(); // the batch is sent into a partition...
    const append = store.append([runeOf('a', 3), runeOf('b', 1)]);
    const outcome = append.then(
      () => undefined,
      (e: unknown) => e,
    );
    await until(async () => (await direct.head('a'))?.seq === 2, 'the head, read beside the partition');
    proxy.cut(); // ...and the connection is lost
    expect(await outcome).toMatchObject({ name: 'StoreError', code: 'unavailable' });
    expect(((await outcome) as Error).message).toContain('the connection to PostgreSQL was lost or refused');
    expect(await direct.read('a')).toEqual(runesOf('a', 1, 2));
    expect(await direct.head('b')).toBeUndefined();

    proxy.release();
    await store.append([runeOf('a', 3), runeOf('b', 1)]);
    expect(await direct.read('a')).toEqual(runesOf('a', 1, 3));
  });

  it('fails a batch sent into a network partition with code unavailable after queryTimeoutMs, instead of waiting for TCP, and works again after', async () => {
    const proxy = await tcpProxy();
    proxies.push(proxy);
    const store = await openStore({ connectionString: postgresUrlVia(proxy.port), queryTimeoutMs: 300 });
    const direct = await openStore({ schema: store.schema });
    await store.append(runesOf('a', 1, 2));
    proxy.hold(); // no cut: the connection stays open, no byte goes through
    await expect(store.append([runeOf('a', 3)])).rejects.toMatchObject({ code: 'unavailable', message: expect.stringContaining('no answer within queryTimeoutMs (300 ms)') });
    await expect(store.head('a')).rejects.toMatchObject({ code: 'unavailable' }); // a new connection waits in the partition too
    // The store dropped its connection; the partition drops what it held (else it would reach the
    // server late: why `unavailable` says the write may have been committed).
    proxy.cut();
    proxy.release();
    expect(await direct.read('a')).toEqual(runesOf('a', 1, 2));
    await store.append([runeOf('a', 3)]);
    expect((await direct.head('a'))?.seq).toBe(3);
  });

  it('reconnects its tail after the LISTEN connection is cut, and catches up on what was committed meanwhile', async () => {
    const proxy = await tcpProxy();
    proxies.push(proxy);
    // No poll to speak of: what it hears after the cut comes from the catch-up at reconnect.
    const follower = await openStore({ connectionString: postgresUrlVia(proxy.port), pollMs: 3_600_000 });
    const writer = await openStore({ schema: follower.schema });
    const { heard, listener } = recorder();
    follower.tail(listener);
    await follower.catchUp();
    await writer.append(runesOf('a', 1, 1));
    await until(() => heard.length === 1, 'the first rune, by notification');

    proxy.hold();
    proxy.cut(); // the LISTEN connection is lost; its reconnect waits in the partition
    await writer.append(runesOf('a', 2, 2)); // notified to no one
    proxy.release();
    await until(() => heard.length === 3, 'the runes committed while disconnected');
    expect(heard).toEqual(['a:1', 'a:2', 'a:3']);
    await writer.append(runesOf('a', 4, 1));
    await until(() => heard.length === 4, 'a rune after the reconnect, by notification');
  });
});
