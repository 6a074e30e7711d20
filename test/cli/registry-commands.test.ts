import { existsSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { agentRegistration, createEngine, type AgentManagerSessionState, type AgentRegistrationState } from '../../src/index.js';
import { createClient } from '../../src/server/client/index.js';
import { sqliteStore } from '../../src/streams/sqlite-store.js';
import { TestClient } from '../support/ws-client.js';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../support/runestream-process.js';

afterEach(cleanUpProcesses);

/** Issue 26's frame, with a request id (the protocol needs one) and the file under the test's folder. */
const pwnFrame = (stream: string, file: string): string =>
  `{"op":"spawn","id":1,"stream":"${stream}","machine":"agent-registration","input":{"name":"pwn","model":"offline","tools":["x"],"mcpServers":{"x":{"command":"sh","args":["-c","id > ${file}"]}}}}`;

/** A configuration with the registry; `extra` adds or overrides keys. */
const configFile = (db: string, extra: Record<string, unknown> = {}): string => {
  const file = join(dirname(db), 'runestream.json');
  writeFileSync(
    file,
    JSON.stringify({ models: { offline: { type: 'scripted', answers: [{ text: 'OK' }] } }, agents: { assistant: { model: 'offline' } }, defaultRole: 'assistant', ...extra }),
  );
  return file;
};

/** The answer to request `id`. */
const answer = (client: TestClient, id: string | number) => client.find((m) => (m.op === 'ack' || m.op === 'error') && m.id === id, `the answer to ${id}`);

describe('runestream serve: a registration runs no command a client sends (issue 26, item 1)', () => {
  it('refuses the frame: forbidden by default (clients may not spawn agent-registration); with clientRegistration, invalid_input naming the server; at another stream, invalid_stream; a redefine likewise: no file is created', async () => {
    const db = tempDb();
    const pwned = join(dirname(db), 'PWNED');
    // By default clients may not register.
    let cli = runestream(['serve', '--port', '0', '--db', db, '--config', configFile(db, { registry: {} })]);
    let [, url] = await cli.line(LISTENING);
    let client = await TestClient.connect(url!);
    client.send(pwnFrame('agent-def/pwn', pwned));
    expect(await answer(client, 1)).toMatchObject({ op: 'error', code: 'forbidden', message: expect.stringContaining('may not spawn machine "agent-registration"') });
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);

    // With clientRegistration: a definition names MCP servers by name; a command is refused.
    cli = runestream(['serve', '--port', '0', '--db', db, '--config', configFile(db, { registry: { clientRegistration: true }, mcpServers: {} })]);
    [, url] = await cli.line(LISTENING);
    client = await TestClient.connect(url!);
    client.send(pwnFrame('agent-def/pwn', pwned));
    expect(await answer(client, 1)).toMatchObject({
      op: 'error',
      code: 'invalid_input',
      message: expect.stringContaining('mcpServers.x: MCP server "x" is given as a command, which the configuration does not declare for agent "pwn"'),
    });
    // Any stream the caller may drive: an agent registration lives only at agent-def/<its name>.
    client.send(pwnFrame('user/bob/reg', pwned).replace('"id":1', '"id":2'));
    expect(await answer(client, 2)).toMatchObject({ op: 'error', code: 'invalid_input' });
    const plain = { name: 'pwn', model: 'offline' };
    expect(await client.request({ op: 'spawn', id: 3, stream: 'user/bob/reg', machine: 'agent-registration', input: plain })).toMatchObject({
      op: 'error',
      code: 'invalid_stream',
      message: 'an agent registration lives only at "agent-def/<name>" (its definition\'s name), not at "user/bob/reg"',
    });
    expect(await client.request({ op: 'spawn', id: 6, stream: 'agent-def/other', machine: 'agent-registration', input: plain })).toMatchObject({
      op: 'error',
      code: 'invalid_stream',
      message: expect.stringContaining('"agent-def/other" is not "agent-def/pwn"'),
    });
    // A redefine of the configured role with a command: refused alike.
    const redefine = {
      type: 'redefine',
      definition: { name: 'assistant', model: 'offline', tools: ['x'], mcpServers: { x: { command: 'sh', args: ['-c', `id > ${pwned}`] } } },
    };
    expect(await client.request({ op: 'dispatch', id: 4, stream: 'agent-def/assistant', event: redefine })).toMatchObject({
      op: 'error',
      code: 'invalid_event',
      message: expect.stringContaining('definition.mcpServers.x: MCP server "x" is given as a command'),
    });
    // A registration naming no command is registered as before.
    expect(await client.request({ op: 'spawn', id: 5, stream: 'agent-def/writer', machine: 'agent-registration', input: { name: 'writer', model: 'offline' } })).toMatchObject(
      { op: 'ack' },
    );
    await cli.line(/^runestream: agent registry: agent-def\/writer ACTIVATING -> ACTIVE$/m);
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
    expect(existsSync(pwned)).toBe(false);
  });

  it('a definition names a configured MCP server by name (the top-level mcpServers), and that command runs', async () => {
    const db = tempDb();
    const started = join(dirname(db), 'started');
    // A real process that records it was started, then exits (so the check fails: it is not an MCP server).
    const recorder = { command: process.execPath, args: ['-e', `require('node:fs').appendFileSync(${JSON.stringify(started)}, 'x'); process.exit(3)`] };
    const file = configFile(db, { registry: { clientRegistration: true, retryBaseMs: 600_000, maxAttempts: 1 }, mcpServers: { recorder } });
    const cli = runestream(['serve', '--port', '0', '--db', db, '--config', file]);
    const [, url] = await cli.line(LISTENING);
    const client = createClient({ url: url!, WebSocket });
    await client.spawn('agent-def/rec', 'agent-registration', { name: 'rec', model: 'offline', tools: ['recorder'] });
    const failed = await firstValueFrom(client.state$<AgentRegistrationState>('agent-def/rec').pipe(filter((s) => s.value === 'ERROR')));
    expect(failed.error).toMatch(/^MCP server "recorder" did not start: /);
    expect(existsSync(started)).toBe(true); // the configured command ran, by name
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
  });

  it('after a restart, an ACTIVE definition stored with a command the configuration does not declare (an older version wrote it) runs nothing: it is paused', async () => {
    const db = tempDb();
    const pwned = join(dirname(db), 'PWNED');
    // The log as an older version left it: the definition registered and ACTIVE.
    const old = createEngine({ store: sqliteStore(db) });
    const definition = { name: 'pwn', model: 'offline', tools: ['x'], mcpServers: { x: { command: 'sh', args: ['-c', `id > ${pwned}`], env: {} } } };
    expect(await old.spawn('agent-def/pwn', agentRegistration, definition)).toMatchObject({ accepted: true });
    for (const type of ['register', 'init_succeeded'] as const) expect(await old.dispatch('agent-def/pwn', { type })).toMatchObject({ accepted: true });
    await old.close();

    const cli = runestream(['serve', '--port', '0', '--db', db, '--config', configFile(db, { registry: {} })]);
    const [, url] = await cli.line(LISTENING);
    const client = createClient({ url: url!, WebSocket });
    const paused = await firstValueFrom(client.state$<AgentRegistrationState>('agent-def/pwn').pipe(filter((s) => s.value === 'PAUSED')));
    expect(paused.reason).toMatch(/^profile unavailable: MCP server "x" is given as a command, which the configuration does not declare for agent "pwn"/);
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
    expect(existsSync(pwned)).toBe(false);
  });

  it('an agent-manager session runs only a configured CLI, by name: a command in its input is ignored, an unknown CLI fails', async () => {
    const db = tempDb();
    const pwned = join(dirname(db), 'PWNED');
    const file = configFile(db, { clis: { quiet: { protocol: 'ndjson', command: process.execPath, args: ['-e', 'process.exit(0)'], cwd: '.' } } });
    const cli = runestream(['serve', '--port', '0', '--db', db, '--config', file]);
    const [, url] = await cli.line(LISTENING);
    const client = createClient({ url: url!, WebSocket });
    await client.spawn('cli/pwn', 'agent-manager-session', { cli: 'pwn', command: 'sh', args: ['-c', `id > ${pwned}`] });
    await client.dispatch('cli/pwn', { type: 'start_session', prompt: 'hi' });
    const failed = await firstValueFrom(client.state$<AgentManagerSessionState>('cli/pwn').pipe(filter((s) => s.value === 'error')));
    expect(JSON.stringify(failed)).toContain('unknown_cli');
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
    expect(existsSync(pwned)).toBe(false);
  });
});
