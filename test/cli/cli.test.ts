import { existsSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseCommand, UsageError } from '../../src/cli/args.js';
import { COMMAND_OPTIONS, COMMANDS, helpCommandFor, helpOf } from '../../src/cli/help.js';
import { storeUrlOf } from '../../src/cli/serve-store.js';
import { sqliteStore } from '../../src/sqlite.js';
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
    for (const flag of ['--port <n>', '--db <file>', '--token-file <file>', '--token <t>', '--host <h>', '--allow-origin <origin>', 'RUNESTREAM_TOKEN']) {
      expect(cli.stdout).toContain(flag);
    }
  });

  it('refuses an unknown flag, naming it, with exit code 2', async () => {
    const cli = runestream(['serve', '--prot', '80']);
    expect(await cli.exited).toBe(2);
    expect(cli.stderr).toBe(`runestream: unknown option '--prot'\nRun "runestream serve --help" for usage.\n`);
  });

  it("serve --help prints serve's options only, each with its default, and exits 0", async () => {
    const cli = runestream(['serve', '--help']);
    expect(await cli.exited).toBe(0);
    expect(cli.stdout).toMatch(/^Usage: runestream serve \[options\]$/m);
    expect(cli.stdout).not.toContain('runestream archive');
    for (const text of ['--port <n>', '(default 7070)', '(default runestream.db)', '(default 10000)', '(default 127.0.0.1)', '--log-level <level>', '(default info)'])
      expect(cli.stdout).toContain(text);
  });

  it("archive --help and restore --help print their own usage; an option of another command points at the command's help", async () => {
    const [archive, restore, wrong] = [runestream(['archive', '--help']), runestream(['restore', '-h']), runestream(['restore', 'conv/c1', '--port', '1'])];
    expect([await archive.exited, await restore.exited, await wrong.exited]).toEqual([0, 0, 2]);
    expect(archive.stdout).toMatch(/^Usage: runestream archive <stream> /);
    expect(archive.stdout).toContain('(default http://127.0.0.1:7070)');
    expect(archive.stdout).not.toContain('--port');
    expect(restore.stdout).toMatch(/^Usage: runestream restore <stream> /);
    expect(wrong.stderr).toBe('runestream: --port is for serve; restore takes --url and the token\nRun "runestream restore --help" for usage.\n');
  });

  it('serves on --port 0 (printing the real port), and SIGTERM flushes the log and exits 0', async () => {
    const db = tempDb();
    const cli = runestream(['serve', '--port', '0', '--db', db]);
    const [, url, port, httpUrl] = await cli.line(LISTENING);
    expect(Number(port)).toBeGreaterThan(0);
    await cli.line(/^runestream: no token set \(--token-file, RUNESTREAM_TOKEN or --token\), so it listens on 127\.0\.0\.1 only$/m);
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

  it('a SIGTERM while it starts is held: once it serves, it stops cleanly (exit 0, log flushed)', async () => {
    const db = tempDb();
    const folder = dirname(db);
    const [held, go] = [join(folder, 'mcp-started'), join(folder, 'mcp-go')];
    const config = join(folder, 'runestream.json');
    const mcp = { command: process.execPath, args: ['--import', 'tsx', 'test/fixtures/mcp/held-server.ts'], env: { HELD_MARKER: held, HELD_GO: go } };
    writeFileSync(
      config,
      JSON.stringify({
        agents: { assistant: { model: 'demo', tools: ['fixture'], mcpServers: { fixture: mcp } } },
        models: { demo: { type: 'demo' } },
        defaultRole: 'assistant',
      }),
    );
    const cli = runestream(['serve', '--port', '0', '--db', db, '--config', config]);
    while (!existsSync(held)) await sleep(20); // serve is starting its agents' MCP server: it does not listen yet
    cli.child.kill('SIGTERM');
    writeFileSync(go, 'go');
    expect(await cli.exited).toBe(0);
    expect(cli.stdout).toMatch(LISTENING);
    expect(cli.stdout).toContain('runestream: SIGTERM: closing');
    expect(cli.stdout).toContain('runestream: stopped, log flushed');
  });

  it('refuses a second server on the same log at start (exit 1, naming the file and what to do); the first carries on', async () => {
    const db = tempDb();
    const first = runestream(['serve', '--port', '0', '--db', db]);
    const [, url] = await first.line(LISTENING);
    const client = await TestClient.connect(url!);
    expect(await client.request({ op: 'spawn', id: 1, stream: 'chat', machine: 'chat-actor' })).toEqual({ op: 'ack', id: 1, seq: 1 });

    const second = runestream(['serve', '--port', '0', '--db', db]);
    expect(await second.exited).toBe(1);
    expect(second.stdout).not.toMatch(LISTENING);
    expect(second.stderr).toContain(`sqliteStore "${db}": another process has the file open for writing`);
    expect(second.stderr).toContain('PostgreSQL store');

    // The first server never noticed: its clients' dispatches go on.
    expect(await client.request({ op: 'dispatch', id: 2, stream: 'chat', event: { type: 'ProcessInteraction', userId } })).toEqual({ op: 'ack', id: 2, seq: 2 });
    await client.close();
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

  it('takes the token from --token-file (trimmed): refuses a client without it', async () => {
    const db = tempDb();
    const tokenFile = join(dirname(db), 'token');
    writeFileSync(tokenFile, '  from-file\n');
    const cli = runestream(['serve', '--port', '0', '--db', db, '--token-file', tokenFile], { RUNESTREAM_TOKEN: 'from-env' });
    const [, url] = await cli.line(LISTENING);
    await expect(TestClient.connect(`${url}/?token=from-env`)).rejects.toMatchObject({ statusCode: 401 });
    const client = await TestClient.connect(url!, { headers: { authorization: 'Bearer from-file' } });
    expect(await client.request({ op: 'spawn', id: 1, stream: 'chat', machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
  });

  it('refuses an empty or unreadable --token-file with exit code 2, naming it', async () => {
    const empty = join(dirname(tempDb()), 'empty-token');
    writeFileSync(empty, ' \n');
    const cli = runestream(['serve', '--port', '0', '--token-file', empty]);
    expect(await cli.exited).toBe(2);
    expect(cli.stderr).toBe(`runestream: --token-file "${empty}" is empty: put the token in it\nRun "runestream serve --help" for usage.\n`);
    const missing = runestream(['serve', '--port', '0', '--token-file', '/nonexistent/token']);
    expect(await missing.exited).toBe(2);
    expect(missing.stderr).toContain('runestream: --token-file "/nonexistent/token" cannot be read: ENOENT');
  });

  it('--allow-origin lets that web origin connect; others are refused with 403', async () => {
    const cli = runestream(['serve', '--port', '0', '--db', tempDb(), '--allow-origin', 'http://localhost:5173']);
    const [, url] = await cli.line(LISTENING);
    const app = await TestClient.connect(url!, { origin: 'http://localhost:5173' });
    expect(await app.request({ op: 'spawn', id: 1, stream: 'chat', machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    await expect(TestClient.connect(url!, { origin: 'http://localhost:5174' })).rejects.toMatchObject({ statusCode: 403 });
  });
});

describe('runestream arguments', () => {
  const parse = (args: string[], env: NodeJS.ProcessEnv = {}) => parseCommand(['serve', ...args], env);

  it('collects every --allow-origin, normalized', () => {
    expect(parse([])).toMatchObject({ allowedOrigins: [] });
    expect(parse(['--allow-origin', 'http://LOCALHOST:5173/app', '--allow-origin', 'https://ui.example', '--allow-origin', '*'])).toMatchObject({
      allowedOrigins: ['http://localhost:5173', 'https://ui.example', '*'],
    });
  });

  it.each([
    [['--allow-origin', 'localhost:5173x'], '--allow-origin must be an origin like http://localhost:5173 (or "*"), got "localhost:5173x"'],
    [['--allow-origin', 'file:///index.html'], '--allow-origin must be an origin like http://localhost:5173 (or "*"), got "file:///index.html"'],
    [['--token', 'a', '--token-file', 'f'], '--token and --token-file are both set: use one'],
    [['--store', 'mysql://x'], '--store must be a PostgreSQL URL like postgres://user@127.0.0.1:5432/runestream (for a SQLite file use --db), got "mysql://x"'],
    [['--store', 'postgres://h/db', '--db', 'x.db'], '--db and --store are both given: the log is either a SQLite file or a PostgreSQL database'],
    [['--lease-ms', '500'], '--lease-ms is for a PostgreSQL log: give --store postgres://... too'],
    [['--store', 'postgres://h/db', '--lease-ms', '5s'], '--lease-ms must be an integer from 100 to 600000 (ms), got "5s"'],
    [['--store', 'postgres://h/db', '--lease-ms', '50'], '--lease-ms must be an integer from 100 to 600000 (ms), got "50"'],
  ])('refuses %j with a usage error', (args, message) => {
    expect(() => parse(args)).toThrow(new UsageError(message));
  });

  it('takes the token from --token, else --token-file, else RUNESTREAM_TOKEN', () => {
    const file = join(dirname(tempDb()), 'token');
    writeFileSync(file, 'from-file\n');
    expect(parse(['--token', 'from-flag'], { RUNESTREAM_TOKEN: 'from-env' })).toMatchObject({ token: 'from-flag' });
    expect(parse(['--token-file', file], { RUNESTREAM_TOKEN: 'from-env' })).toMatchObject({ token: 'from-file' });
    expect(parse([], { RUNESTREAM_TOKEN: 'from-env' })).toMatchObject({ token: 'from-env' });
    expect(parse([])).toMatchObject({ token: undefined });
  });

  it('reads the schema from a --store URL and never shows its password', () => {
    expect(storeUrlOf('postgres://app:s3cret@db:5432/log?schema=rs&sslmode=require')).toEqual({
      connectionString: 'postgres://app:s3cret@db:5432/log?sslmode=require',
      schema: 'rs',
      description: 'postgres://app:***@db:5432/log?sslmode=require schema rs',
    });
    expect(storeUrlOf('postgres://app@db/log')).toEqual({ connectionString: 'postgres://app@db/log', description: 'postgres://app@db/log' });
  });

  it('takes a PostgreSQL log from --store, else RUNESTREAM_STORE; none: the SQLite file', () => {
    expect(parse([])).not.toHaveProperty('store');
    expect(parse(['--store', 'postgres://a@127.0.0.1/x'], { RUNESTREAM_STORE: 'postgresql://b@h/y' })).toMatchObject({ store: { url: 'postgres://a@127.0.0.1/x' } });
    expect(parse([], { RUNESTREAM_STORE: 'postgresql://b@h/y' })).toMatchObject({ store: { url: 'postgresql://b@h/y' } });
    expect(parse(['--store', 'postgres://a@127.0.0.1/x', '--lease-ms', '1500'])).toMatchObject({ store: { url: 'postgres://a@127.0.0.1/x', leaseMs: 1500 } });
    expect(() => parse([], { RUNESTREAM_STORE: 'x.db' })).toThrow(
      new UsageError('RUNESTREAM_STORE must be a PostgreSQL URL like postgres://user@127.0.0.1:5432/runestream (for a SQLite file use --db), got "x.db"'),
    );
  });
});

describe('runestream <command> --help', () => {
  /** The long options a help text lists. */
  const listed = (help: string): string[] => [...help.matchAll(/^ {2}(?:-\w, )?--([\w-]+)/gm)].map((m) => m[1]!).sort();

  it.each(COMMANDS)('%s: the help lists exactly the options the parser takes for it, and --help asks for it', (command) => {
    expect(listed(helpOf(command))).toEqual([...COMMAND_OPTIONS[command]].sort());
    expect(parseCommand([command, '--help'], {})).toEqual({ command: 'help', topic: command });
    expect(parseCommand(['--help'], {})).toEqual({ command: 'help' });
  });

  it('every option a help lists says its default', () => {
    for (const command of COMMANDS) {
      const options = helpOf(command)
        .split(/\n(?= {2}-)/)
        .slice(1);
      for (const option of options.filter((o) => !o.startsWith('  -h'))) expect(option, `${command}: ${option}`).toMatch(/\(default:? [^)]+\)/);
    }
  });

  it('points a usage error at the help of the command the line names', () => {
    expect(() => parseCommand(['archive', 'conv/c1', '--verbose'], {})).toThrow(new UsageError("unknown option '--verbose'"));
    expect(helpCommandFor(['archive', 'conv/c1', '--verbose'])).toBe('runestream archive --help');
    expect(helpCommandFor(['--verbose'])).toBe('runestream --help');
    expect(() => parseCommand(['frob', '--help'], {})).toThrow(new UsageError('unknown command "frob": the commands are "serve", "archive" and "restore"'));
  });

  it("takes --log-level for serve, one of pino's levels", () => {
    expect(parseCommand(['serve', '--log-level', 'debug'], {})).toMatchObject({ command: 'serve', logLevel: 'debug' });
    expect(parseCommand(['serve'], {})).not.toHaveProperty('logLevel');
    expect(() => parseCommand(['serve', '--log-level', 'loud'], {})).toThrow(
      new UsageError('--log-level must be one of trace, debug, info, warn, error, fatal, silent, got "loud"'),
    );
    expect(() => parseCommand(['archive', 'conv/c1', '--log-level', 'debug'], {})).toThrow(new UsageError('--log-level is for serve; archive takes --url and the token'));
  });
});
