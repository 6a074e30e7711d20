import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pino } from 'pino';
import { VirtualTimeScheduler } from 'rxjs';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { agentCliSessions } from '../../src/agents.js';
import { logLineOf, logServing } from '../../src/cli/serve-log.js';
import { createEngine, type EngineError, type Rune } from '../../src/index.js';
import { event, fakeAdapter, fakeSpec, until } from '../effects/cli/support.js';
import { createClient } from '../../src/server/client/index.js';
import { dropSchemas, POSTGRES_URL, postgresUrlVia, randomSchema } from '../support/postgres.js';
import { tcpProxy } from '../support/tcp-proxy.js';
import { TestClient } from '../support/ws-client.js';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../support/runestream-process.js';

afterEach(cleanUpProcesses);

/** The JSON log lines a serve process printed (its stdout is a pipe, so the log is JSON). */
const jsonLines = (stdout: string): Record<string, unknown>[] =>
  stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);

/** Pino's numbers for its levels. */
const LEVEL = { debug: 20, info: 30, warn: 40, error: 50 } as const;

describe('runestream serve: its log', () => {
  it('logs a model it cannot reach, naming the model, and the turn that failed; connections at debug', async () => {
    const cli = runestream(['serve', '--port', '0', '--db', tempDb(), '--model', 'unreachable-llm@http://127.0.0.1:9/v1', '--log-level', 'debug']);
    const [, url] = await cli.line(LISTENING);
    const client = createClient({ url: url!, WebSocket });
    await client.spawn('conv/c1/agent/a/turn', 'turn-engine');
    await client.dispatch('conv/c1/agent/a/turn', { type: 'start_turn', input: 'hello?' });
    await cli.line(/"msg":"turn failed: /);
    await client.close();
    await cli.line(/"msg":"connection 1 closed"/);
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);

    const lines = jsonLines(cli.stdout);
    expect(lines[0]).toMatchObject({ level: LEVEL.info, name: 'runestream', msg: 'listening', url });
    const modelFailure = lines.find((line) => line.level === LEVEL.warn && String(line.msg).startsWith('model call failed'));
    expect(modelFailure).toMatchObject({ provider: 'unreachable-llm', stream: 'provider/unreachable-llm' });
    expect(modelFailure!.msg).toContain('unreachable-llm');
    expect(lines.find((line) => line.level === LEVEL.error && String(line.msg).startsWith('turn failed'))).toMatchObject({ stream: 'conv/c1/agent/a/turn' });
    expect(lines.filter((line) => line.level === LEVEL.debug).map((line) => line.msg)).toEqual(['connection 1 opened', 'connection 1 closed']);
  });

  it("takes the level from the configuration's log.level: at warn, neither listening nor connections are logged", async () => {
    const db = tempDb();
    const config = join(dirname(db), 'runestream.json');
    writeFileSync(config, JSON.stringify({ models: { demo: { type: 'demo' } }, agents: { helper: { model: 'demo' } }, defaultRole: 'helper', log: { level: 'warn' } }));
    const cli = runestream(['serve', '--port', '0', '--db', db, '--config', config]);
    const [, url] = await cli.line(LISTENING);
    const client = createClient({ url: url!, WebSocket });
    await client.spawn('chat', 'chat-actor');
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
    expect(jsonLines(cli.stdout)).toEqual([]);
  });

  it('with a PostgreSQL log, logs the shards this process comes to own', async () => {
    const schema = randomSchema();
    try {
      // No metrics: with a PostgreSQL log their snapshot file would land in the working folder.
      const config = join(dirname(tempDb()), 'runestream.json');
      writeFileSync(config, JSON.stringify({ models: { demo: { type: 'demo' } }, agents: { helper: { model: 'demo' } }, defaultRole: 'helper', metrics: { enabled: false } }));
      const cli = runestream(['serve', '--port', '0', '--store', `${POSTGRES_URL}?schema=${schema}`, '--lease-ms', '500', '--config', config]);
      await cli.line(LISTENING);
      const [line] = await cli.line(/^\{.*"msg":"shards owned by .*$/m);
      cli.child.kill('SIGTERM');
      expect(await cli.exited).toBe(0);
      const owned = JSON.parse(line) as { level: number; owner: string; shards: number[]; msg: string };
      expect(owned.level).toBe(LEVEL.info);
      expect(owned.shards.length).toBeGreaterThan(0);
      expect(owned.msg).toBe(`shards owned by ${owned.owner}: ${owned.shards.length}`);
      expect(cli.stdout).toContain(`(shard leases of ${owned.owner})`);
    } finally {
      await dropSchemas([schema]);
    }
  });

  it('refuses a log.level that is not a level, naming the field', async () => {
    const db = tempDb();
    const config = join(dirname(db), 'runestream.json');
    writeFileSync(config, JSON.stringify({ log: { level: 'loud' } }));
    const cli = runestream(['serve', '--port', '0', '--db', db, '--config', config]);
    expect(await cli.exited).toBe(2);
    expect(cli.stderr).toContain(`${config}: log.level:`);
  });
});

describe('the log lines runes call for', () => {
  const rune = (fields: Partial<Rune>): Rune => ({ stream: 's', seq: 2, machine: 'm', kind: 'k', event: { type: 'k' }, at: 0, ...fields }) as Rune;

  it('a tool call that failed or timed out is a warning; a success or a cancel is not logged', () => {
    const result = (status: string, more: object = {}) =>
      logLineOf(rune({ stream: 'conv/c/agent/a/call/k1', machine: 'tool-call', kind: 'tool.result', payload: { callId: 'k1', status, ...more } }));
    expect(result('error', { error: 'ENOENT' })).toEqual({
      level: 'warn',
      msg: 'tool call k1 ended error',
      fields: { stream: 'conv/c/agent/a/call/k1', callId: 'k1', status: 'error', error: 'ENOENT' },
    });
    expect(result('timeout')?.level).toBe('warn');
    expect(result('success', { output: 1 })).toBeUndefined();
    expect(result('cancelled')).toBeUndefined();
  });

  it("a provider's breaker opening is a warning naming the provider; other breaker moves are not logged", () => {
    const breaker = (from: string, to: string, kind = 'success') =>
      logLineOf(rune({ stream: 'provider/big', machine: 'circuit-breaker', kind, from, to, event: { type: kind } }));
    expect(breaker('HALF_OPEN', 'OPEN', 'open_timeout_elapsed')).toMatchObject({ level: 'warn', fields: { provider: 'big' } });
    expect(breaker('HALF_OPEN', 'CLOSED')).toBeUndefined();
  });
});

describe('the serve log under a flood', () => {
  it('a CLI printing 200 events its session refuses writes 3 command_rejected lines (log.maxRepeats 3), then one line saying 197 more, when the window ends (virtual time)', async () => {
    const flood = Array.from({ length: 200 }, () => event({ type: 'approve_action' })); // not an event of streaming: each is refused
    const adapter = fakeAdapter({
      interactive: false,
      script: () => [
        event({ type: 'session_created', sessionId: 't' }),
        event({ type: 'api_req_started', ts: 1 }),
        ...flood,
        { line: 'noise 1' },
        { line: 'noise 2' },
        event({ type: 'ask:completion_result', ts: 2 }),
      ],
    });
    const engine = createEngine({ epics: [agentCliSessions({ clis: { fake: fakeSpec(adapter) }, defaultCli: 'fake' })] });
    const errors: EngineError[] = [];
    engine.errors$.subscribe((error) => errors.push(error));
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const scheduler = new VirtualTimeScheduler();
    const stop = logServing(engine, logger, undefined, { maxRepeats: 3, repeatWindowMs: 10_000, scheduler });
    try {
      await engine.spawn('s1', 'agent-manager-session', { autoApprove: true });
      await engine.dispatch('s1', { type: 'start_session', prompt: 'go' });
      await until(engine, 's1', (s) => s.value === 'completed');
      // The refusals come after the session's own runes, as the engine gets to them: waited for, however loaded the machine.
      await vi.waitFor(() => expect(errors.filter((error) => error.type === 'command_rejected')).toHaveLength(200), { timeout: 30_000 });
      const rejected = () => lines.filter((line) => String(line.msg).startsWith('command_rejected'));
      expect(rejected()).toHaveLength(3);
      // Another kind of line has a window of its own: both garbage lines are written.
      expect(lines.filter((line) => String(line.msg).startsWith('output_ignored'))).toHaveLength(2);
      expect(lines.filter((line) => line.repeated !== undefined)).toEqual([]);

      scheduler.flush(); // the window ends
      const summaries = lines.filter((line) => line.repeated !== undefined);
      expect(summaries).toHaveLength(1);
      expect(summaries[0]).toMatchObject({ level: 50, key: 'command_rejected agentCliSessions', repeated: 197 });
      expect(summaries[0]!.msg).toMatch(/^"command_rejected agentCliSessions" repeated 197 more times in 10000 ms \(over log\.maxRepeats 3\); the last: command_rejected: /);
      expect(lines).toHaveLength(3 + 2 + 1);
    } finally {
      stop();
      await engine.close();
    }
  });
});

describe('runestream serve: a PostgreSQL outage in its log', () => {
  it('logs one warning when the database becomes unreachable, however many calls fail, and one info line when it is back', async () => {
    const schema = randomSchema();
    const proxy = await tcpProxy();
    try {
      const config = join(dirname(tempDb()), 'runestream.json');
      writeFileSync(config, JSON.stringify({ models: { demo: { type: 'demo' } }, agents: { helper: { model: 'demo' } }, defaultRole: 'helper', metrics: { enabled: false } }));
      const cli = runestream(['serve', '--port', '0', '--store', `${postgresUrlVia(proxy.port)}?schema=${schema}`, '--config', config]);
      const [, url] = await cli.line(LISTENING);
      const client = await TestClient.connect(url!);
      expect(await client.request({ op: 'spawn', id: 'up', stream: 'chat-up', machine: 'chat-actor' })).toMatchObject({ op: 'ack' });

      // PostgreSQL goes away: every connection reset, new ones refused.
      proxy.refuse(true);
      proxy.cut();
      for (let i = 0; i < 3; i++)
        expect(await client.request({ op: 'spawn', id: `down-${i}`, stream: `chat-down-${i}`, machine: 'chat-actor' })).toMatchObject({ op: 'error' });
      await cli.line(/"msg":"store postgres schema \S+ is unreachable: /);

      // Back: the next call that reaches it logs the recovery.
      proxy.refuse(false);
      let answer = await client.request({ op: 'spawn', id: 'back-0', stream: 'chat-back', machine: 'chat-actor' });
      for (let i = 1; answer.op !== 'ack' && i < 20; i++) answer = await client.request({ op: 'spawn', id: `back-${i}`, stream: 'chat-back', machine: 'chat-actor' });
      expect(answer).toMatchObject({ op: 'ack' });
      await cli.line(/"msg":"store postgres schema \S+ is reachable again"/);
      await client.close();
      cli.child.kill('SIGTERM');
      await cli.exited;

      const lines = jsonLines(cli.stdout).filter((line) => String(line.msg).startsWith('store postgres schema'));
      expect(lines.map((line) => [line.level, String(line.msg).replace(/: .*/s, '')])).toEqual([
        [LEVEL.warn, `store postgres schema ${schema} is unreachable`],
        [LEVEL.info, `store postgres schema ${schema} is reachable again`],
      ]);
      expect(lines[0]).toMatchObject({ store: `postgres schema ${schema}`, error: expect.stringContaining('the connection to PostgreSQL was lost or refused') });
    } finally {
      await proxy.close();
      await dropSchemas([schema]);
    }
  });
});
