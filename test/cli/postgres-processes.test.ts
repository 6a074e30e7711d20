import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { firstValueFrom } from 'rxjs';
import { WebSocket } from 'ws';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Rune } from '../../src/index.js';
import { createClient, type RunestreamClient } from '../../src/server/client/index.js';
import { POSTGRES_URL, dropSchemas, randomSchema } from '../support/postgres.js';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../support/runestream-process.js';

const schemas: string[] = [];
const clients: RunestreamClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
  cleanUpProcesses();
});
afterAll(() => dropSchemas(schemas));

/** `n` `runestream serve --store` processes on one fresh schema, started at once (their migrations race), each with a client. */
async function processes(n: number) {
  const schema = randomSchema();
  schemas.push(schema);
  // The metrics snapshots go to a temporary folder, not the working one.
  const config = join(dirname(tempDb()), 'runestream.json');
  writeFileSync(
    config,
    JSON.stringify({ models: { offline: { type: 'demo' } }, agents: { assistant: { model: 'offline' } }, defaultRole: 'assistant', metrics: { file: 'metrics.json' } }),
  );
  const started = Array.from({ length: n }, () =>
    runestream(['serve', '--port', '0', '--store', `${POSTGRES_URL}?schema=${schema}`, '--lease-ms', '1500', '--config', config]),
  );
  const urls = await Promise.all(started.map(async (cli) => (await cli.line(LISTENING))[1]!));
  const connected = urls.map((url) => createClient({ url, WebSocket }));
  clients.push(...connected);
  return { schema, processes: started, clients: connected };
}

/** Every seq `client` hears on `stream` from now on, once it is subscribed (its first state came). */
async function heard(client: RunestreamClient, stream: string): Promise<number[]> {
  const seqs: number[] = [];
  client.runes$(stream).subscribe((rune: Rune) => seqs.push(rune.seq));
  await firstValueFrom(client.state$(stream));
  return seqs;
}

const until = (seqs: number[], seq: number) =>
  new Promise<void>((resolve) => {
    const check = () => (seqs.includes(seq) ? resolve() : setTimeout(check, 20));
    check();
  });

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** The stored seqs of `stream`, in order. */
async function storedSeqs(schema: string, stream: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ seq: string }>(`SELECT seq FROM "${schema}".rs_runes WHERE stream = $1 ORDER BY seq`, [stream]);
    return rows.map((row) => Number(row.seq));
  } finally {
    await client.end();
  }
}

describe('runestream serve --store: 3 processes on one PostgreSQL log', () => {
  it('dispatches from all three to the same streams interleave with no gap and no duplicate, and every subscriber on every process sees seqs 1..N once', async () => {
    const {
      schema,
      clients: [a, b, c],
    } = await processes(3);
    const streams = ['chat/s1', 'chat/s2'];
    for (const stream of streams) await a!.spawn(stream, 'chat-actor');
    const subscribers = await Promise.all([a!, b!, c!].flatMap((client) => streams.map((stream) => heard(client, stream))));
    const PINGS = 20;
    // Every client pings every stream at once: the processes race for each next seq.
    const acknowledged = await Promise.all(
      [a!, b!, c!].flatMap((client) => streams.flatMap((stream) => range(1, PINGS).map(() => client.dispatch(stream, { type: 'Ping' })))),
    );
    const last = 1 + 3 * PINGS;
    for (const stream of streams) {
      const seqs = acknowledged.filter((_, i) => streams[Math.floor(i / PINGS) % streams.length] === stream).map((ack) => ack.seq);
      expect([...seqs].sort((x, y) => x - y)).toEqual(range(2, last));
      expect(await storedSeqs(schema, stream)).toEqual(range(1, last));
    }
    await Promise.all(subscribers.map((seqs) => until(seqs, last)));
    for (const seqs of subscribers) expect(seqs).toEqual(range(2, last));
  });

  it('kill -9 of one process under load: no acknowledged rune lost, no gap, no duplicate; the others carry on', async () => {
    const {
      schema,
      processes: [, , doomed],
      clients: [a, b, c],
    } = await processes(3);
    const stream = 'chat/load';
    await a!.spawn(stream, 'chat-actor');
    const acknowledged: number[] = [];
    const ping = async (client: RunestreamClient, times: number): Promise<void> => {
      for (let i = 0; i < times; i++) {
        try {
          acknowledged.push((await client.dispatch(stream, { type: 'Ping' })).seq);
        } catch (error) {
          // A clean refusal appended nothing; the killed process's client loses its answers: neither was acknowledged.
          if ((error as { code?: string }).code === 'contention') continue;
          if (client !== c) throw error;
          return;
        }
      }
    };
    const load = Promise.all([ping(a!, 40), ping(b!, 40), ping(c!, 1000)]);
    await until(acknowledged, 30);
    doomed!.child.kill('SIGKILL');
    await load;
    const stored = await storedSeqs(schema, stream);
    expect(stored).toEqual(range(1, stored.length));
    for (const seq of acknowledged) expect(stored).toContain(seq);
    expect(new Set(acknowledged).size).toBe(acknowledged.length);
    // The survivors still serve the stream.
    const { seq } = await b!.dispatch(stream, { type: 'Ping' });
    expect(seq).toBe(stored.length + 1);
  });
});
