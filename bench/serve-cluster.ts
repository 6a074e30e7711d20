import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { WebSocket } from 'ws';
import { createClient, type RunestreamClient } from '../src/server/client/index.js';
import { within } from './harness.js';

const DATABASE = 'postgres://postgres@127.0.0.1:5432/test';
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const LISTENING = /^runestream: listening on (ws:\/\/127\.0\.0\.1:\d+) /m;

/** `runestream serve --store` processes on one fresh schema, each with a client, for a benchmark. */
export interface ServeCluster {
  /** Starts one more process and resolves with a client of it once it listens. Start them one after another: the first creates the schema. */
  start(): Promise<RunestreamClient>;
  /** Closes the clients, stops the processes, drops the schema and the temporary folder. */
  close(): Promise<void>;
}

/** A cluster serving `config` (a `runestream.json`'s content; its metrics are turned off). */
export function serveCluster(config: object): ServeCluster {
  const schema = `rs_bench_${randomBytes(6).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'runestream-bench-'));
  const file = join(dir, 'runestream.json');
  writeFileSync(file, JSON.stringify({ ...config, metrics: { enabled: false } }));
  const children: ChildProcess[] = [];
  const clients: RunestreamClient[] = [];
  return {
    async start() {
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', '0', '--store', `${DATABASE}?schema=${schema}`, '--config', file], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      children.push(child);
      let out = '';
      const url = new Promise<string>((resolve, reject) => {
        child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
          out += chunk;
          const match = LISTENING.exec(out);
          if (match) resolve(match[1]!);
        });
        child.once('exit', (code) => reject(new Error(`serve exited (${code}) before listening: ${out}`)));
      });
      const client = createClient({ url: await within(url, 60_000, `serve process ${children.length}`), WebSocket });
      clients.push(client);
      return client;
    },
    async close() {
      await Promise.all(clients.map((client) => client.close()));
      for (const child of children) child.kill('SIGTERM');
      await Promise.all(children.map((child) => (child.exitCode === null ? new Promise((resolve) => child.once('exit', resolve)) : Promise.resolve())));
      const pool = new pg.Pool({ connectionString: DATABASE, max: 1 });
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
