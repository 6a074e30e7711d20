import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { firstValueFrom } from 'rxjs';
import { WebSocket } from 'ws';
import { createClient, type RunestreamClient } from '../src/server/client/index.js';
import { percentile, within } from './harness.js';

const DATABASE = 'postgres://postgres@127.0.0.1:5432/test';
const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** Dispatches per second, and how many: paced, so the figure is latency, not a queue. */
const PER_SECOND = 100;
const DISPATCHES = 1_000;
const WARMUP = 100;
const LISTENING = /^runestream: listening on (ws:\/\/127\.0\.0\.1:\d+) /m;

/** A `runestream serve --store` process; resolves with its ws URL once it listens. */
function serveProcess(store: string, config: string): { child: ChildProcess; url: Promise<string> } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', '0', '--store', store, '--config', config], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const url = new Promise<string>((resolve, reject) => {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const match = LISTENING.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code) => reject(new Error(`serve exited (${code}) before listening: ${out}`)));
  });
  return { child, url };
}

/**
 * Issue 15: the latency from a dispatch on one `runestream serve --store` process to a subscriber
 * of the stream on another (each process with its WebSocket client, one PostgreSQL schema): a
 * chat actor's `Ping` sent by the client of process A every 10 ms, timed from the send to the
 * rune reaching the client of process B (the path: A's engine, the append, NOTIFY, B's tail
 * catch-up, B's engine, B's WebSocket). Information: p50 and p99, and the same dispatch's own
 * acknowledgement on A for comparison.
 */
export async function benchPostgresLatency(): Promise<boolean> {
  const schema = `rs_bench_${randomBytes(6).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'runestream-bench-'));
  const config = join(dir, 'runestream.json');
  writeFileSync(
    config,
    JSON.stringify({ models: { offline: { type: 'demo' } }, agents: { assistant: { model: 'offline' } }, defaultRole: 'assistant', metrics: { enabled: false } }),
  );
  const store = `${DATABASE}?schema=${schema}`;
  // The first process creates the schema; the second starts once it exists.
  const a = serveProcess(store, config);
  const clients: RunestreamClient[] = [];
  const children: ChildProcess[] = [a.child];
  try {
    const urlA = await within(a.url, 60_000, 'process A');
    const b = serveProcess(store, config);
    children.push(b.child);
    const urlB = await within(b.url, 60_000, 'process B');
    const [sender, receiver] = [createClient({ url: urlA, WebSocket }), createClient({ url: urlB, WebSocket })];
    clients.push(sender, receiver);
    const stream = 'chat/latency';
    await sender.spawn(stream, 'chat-actor');
    const sentAt = new Map<number, number>();
    const crossed: number[] = [];
    const acked: number[] = [];
    let heard = 0;
    const allHeard = new Promise<void>((resolve) => {
      receiver.runes$(stream).subscribe((rune) => {
        const at = sentAt.get(rune.seq);
        if (at !== undefined && rune.seq > WARMUP + 1) crossed.push(performance.now() - at);
        if (++heard === DISPATCHES) resolve();
      });
    });
    await firstValueFrom(receiver.state$(stream));
    for (let i = 0; i < DISPATCHES; i++) {
      const started = performance.now();
      // seq i + 2: the spawn is 1 and this client is the only writer.
      sentAt.set(i + 2, started);
      void sender.dispatch(stream, { type: 'Ping' }).then(() => {
        if (i >= WARMUP) acked.push(performance.now() - started);
      });
      await new Promise((resolve) => setTimeout(resolve, 1000 / PER_SECOND));
    }
    await within(allHeard, 30_000, 'the subscriber on process B');
    crossed.sort((x, y) => x - y);
    acked.sort((x, y) => x - y);
    const ms = (n: number) => `${n.toFixed(1)} ms`;
    console.log(`\nPing dispatched on process A to a subscriber on process B (one PostgreSQL log), ${PER_SECOND}/s, ${DISPATCHES - WARMUP} timed`);
    console.log(`  A's dispatch to B's subscriber   p50 ${ms(percentile(crossed, 50))}, p99 ${ms(percentile(crossed, 99))}`);
    console.log(`  A's own acknowledgement          p50 ${ms(percentile(acked, 50))}, p99 ${ms(percentile(acked, 99))}`);
    console.log('  (information: no bar)');
    return true;
  } finally {
    await Promise.all(clients.map((client) => client.close()));
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((child) => (child.exitCode === null ? new Promise((resolve) => child.once('exit', resolve)) : Promise.resolve())));
    const pool = new pg.Pool({ connectionString: DATABASE, max: 1 });
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await pool.end();
    rmSync(dir, { recursive: true, force: true });
  }
}
