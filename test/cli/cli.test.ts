import { afterEach, describe, expect, it } from 'vitest';
import { sqliteStore } from '../../src/index.js';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../support/runestream-process.js';
import { fetchJson } from '../support/sse-client.js';
import { TestClient } from '../support/ws-client.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';

afterEach(cleanUpProcesses);

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
