import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { sqliteStore } from '../../src/index.js';
import { fetchJson } from '../support/sse-client.js';
import { TestClient } from '../support/ws-client.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';

/** `runestream <args>` as a real process (node with the tsx loader: one process, so signals reach it directly). */
function runestream(args: string[], env: Record<string, string> = {}) {
  const { RUNESTREAM_TOKEN: _, ...inherited } = process.env;
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
    cwd: root,
    env: { ...inherited, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const listeners: (() => void)[] = [];
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    for (const listener of listeners) listener();
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  children.push(child);
  return {
    child,
    exited,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    /** Waits for a line of stdout matching `pattern`; fails if the process exits first. */
    line: (pattern: RegExp): Promise<RegExpExecArray> =>
      new Promise((resolve, reject) => {
        const check = (): boolean => {
          const match = pattern.exec(stdout);
          if (match) resolve(match);
          return match !== null;
        };
        if (check()) return;
        listeners.push(check);
        void exited.then((code) => reject(new Error(`exited (${code}) before printing ${pattern}; stdout: ${stdout}; stderr: ${stderr}`)));
      }),
  };
}

const LISTENING = /^runestream: listening on (ws:\/\/127\.0\.0\.1:(\d+)) and (http:\/\/127\.0\.0\.1:\d+) \(log: .*\)$/m;

const children: ChildProcess[] = [];
const dirs: string[] = [];
const tempDb = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-cli-'));
  dirs.push(dir);
  return join(dir, 'log.db');
};
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('runestream (the command)', () => {
  it('--help prints the usage and exits 0', async () => {
    const cli = runestream(['--help']);
    expect(await cli.exited).toBe(0);
    expect(cli.stdout).toContain('Usage: runestream serve [options]');
    for (const flag of ['--port <n>', '--db <file>', '--token <t>', '--host <h>', 'RUNESTREAM_TOKEN']) expect(cli.stdout).toContain(flag);
  });

  it('refuses an unknown flag, naming it, with exit code 2', async () => {
    const cli = runestream(['serve', '--prot', '80']);
    expect(await cli.exited).toBe(2);
    expect(cli.stderr).toBe(`runestream: unknown option '--prot'\nRun "runestream --help" for usage.\n`);
  });

  it('serves on --port 0 (printing the real port), and SIGTERM flushes the log and exits 0', async () => {
    const db = tempDb();
    const cli = runestream(['serve', '--port', '0', '--db', db]);
    const [, url, port, httpUrl] = await cli.line(LISTENING);
    expect(Number(port)).toBeGreaterThan(0);
    await cli.line(/^runestream: no token set \(--token or RUNESTREAM_TOKEN\), so it listens on 127\.0\.0\.1 only$/m);
    expect(await fetchJson(`${httpUrl}/healthz`)).toMatchObject({ status: 200, body: { ok: true, connections: 0 } });

    const client = await TestClient.connect(url!);
    expect(await client.request({ op: 'spawn', id: 1, stream: 'chat', machine: 'chat-actor' })).toEqual({ op: 'ack', id: 1, seq: 1 });
    expect(await client.request({ op: 'dispatch', id: 2, stream: 'chat', event: { type: 'ProcessInteraction', userId } })).toEqual({ op: 'ack', id: 2, seq: 2 });
    client.send({ op: 'subscribe', stream: 'chat' });
    expect(await client.next((m) => m.op === 'snapshot')).toMatchObject({ seq: 2, state: { value: 'running', userId } });

    cli.child.kill('SIGTERM');
    expect((await client.closed).code).toBe(1001);
    expect(await cli.exited).toBe(0);
    expect(cli.stdout).toContain('runestream: stopped, log flushed');

    const store = sqliteStore(db);
    expect((await store.read('chat')).map((r) => [r.seq, r.kind, r.to])).toEqual([
      [1, 'spawned', 'idle'],
      [2, 'ProcessInteraction', 'running'],
    ]);
    await store.close();
  });

  it('takes the token from RUNESTREAM_TOKEN: refuses a client without it; SIGINT exits 0', async () => {
    const cli = runestream(['serve', '--port', '0', '--db', tempDb()], { RUNESTREAM_TOKEN: 'from-env' });
    const [, url] = await cli.line(LISTENING);
    await expect(TestClient.connect(url!)).rejects.toMatchObject({ statusCode: 401 });
    const client = await TestClient.connect(`${url}/?token=from-env`);
    expect(await client.request({ op: 'spawn', id: 1, stream: 'chat', machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    expect(cli.stdout).not.toContain('no token set');
    cli.child.kill('SIGINT');
    expect(await cli.exited).toBe(0);
  });
});
