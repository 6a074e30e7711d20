import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { filter, firstValueFrom } from 'rxjs';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { parseCommand, UsageError } from '../../src/cli/args.js';
import type { AgentLifecycleState, AgentManagerSessionState, AgentManagerUiFlags, AutonomyLoopState, CircuitBreakerState, TurnEngineState } from '../../src/index.js';
import { createClient } from '../../src/server/client/index.js';
import { ServerConfigError, parseServerConfig } from '../../src/server/index.js';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../support/runestream-process.js';
import { fetchJson } from '../support/sse-client.js';

afterEach(cleanUpProcesses);

/** Writes a configuration file beside a fresh log; returns both paths. */
function configFile(config: unknown): { db: string; file: string } {
  const db = tempDb();
  const file = join(dirname(db), 'runestream.json');
  writeFileSync(file, typeof config === 'string' ? config : JSON.stringify(config, null, 2));
  return { db, file };
}

describe('runestream serve --config (a real process)', () => {
  it('serves the default role on its chain, says which chain serves, answers /healthz, and falls over from a 429 to the next model', async () => {
    // A chat-completions server on 127.0.0.1 that is rate limited.
    let requests = 0;
    const limited = createHttpServer((req, res) => {
      requests += 1;
      req.resume().on('end', () => {
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '600' });
        res.end(JSON.stringify({ error: { message: 'Rate limit reached' } }));
      });
    });
    await new Promise<void>((resolve) => limited.listen(0, '127.0.0.1', resolve));
    const baseURL = `http://127.0.0.1:${(limited.address() as AddressInfo).port}/v1`;
    try {
      const { db, file } = configFile({
        models: { local: { type: 'openai-compatible', baseURL, model: 'tiny', apiKeyEnv: 'LOCAL_KEY' }, offline: { type: 'demo' } },
        chains: { main: { models: ['local', 'offline'] } },
        agents: { helper: { model: 'main', tools: ['clock', 'add'], system: 'Be brief.' } },
        defaultRole: 'helper',
      });
      const cli = runestream(['serve', '--port', '0', '--db', db, '--config', file], { LOCAL_KEY: 'k1' });
      const [, url, , httpUrl] = await cli.line(LISTENING);
      await cli.line(
        new RegExp(
          `^runestream: helper agent on chain "main": local \\(tiny at ${baseURL.replace(/[.]/g, '\\.')}\\), then offline \\(the offline scripted demo model\\): spawn`,
          'm',
        ),
      );
      expect(await fetchJson(`${httpUrl}/healthz`)).toMatchObject({ status: 200, body: { ok: true } });

      const client = createClient({ url: url!, WebSocket });
      await client.spawn('conv/c/agent/a/turn', 'turn-engine');
      const answered = firstValueFrom(client.state$<TurnEngineState>('conv/c/agent/a/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
      await client.dispatch('conv/c/agent/a/turn', { type: 'start_turn', input: 'hi' });
      expect((await answered).output).toMatch(/^You said "hi"/);
      expect(requests).toBe(1);
      // The Retry-After opened local's breaker at once, for 600 s.
      const local = await firstValueFrom(client.state$<CircuitBreakerState>('provider/local').pipe(filter((s) => s !== undefined)));
      expect(local).toMatchObject({ value: 'OPEN', openForMs: 600_000 });
      await client.close();
      cli.child.kill('SIGTERM');
      expect(await cli.exited).toBe(0);
    } finally {
      limited.close();
    }
  });

  it('with a second role, the default agent delegates to it: the sub-agent runs in the same conversation and its answer comes back', async () => {
    const { db, file } = configFile({
      models: {
        lead: {
          type: 'scripted',
          answers: [{ toolCalls: [{ toolName: 'delegate', input: { role: 'researcher', task: 'find the answer' } }] }, { text: 'The researcher says 42.' }],
        },
        digger: { type: 'scripted', answers: [{ text: '42' }] },
      },
      agents: { assistant: { model: 'lead' }, researcher: { description: 'Looks things up.', model: 'digger' } },
      defaultRole: 'assistant',
      delegation: { maxDepth: 1, maxAgents: 2 },
    });
    const cli = runestream(['serve', '--port', '0', '--db', db, '--config', file]);
    const [, url] = await cli.line(LISTENING);
    const client = createClient({ url: url!, WebSocket });
    await client.spawn('conv/c/agent/a/turn', 'turn-engine');
    const answered = firstValueFrom(client.state$<TurnEngineState>('conv/c/agent/a/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    await client.dispatch('conv/c/agent/a/turn', { type: 'start_turn', input: 'what is the answer?' });
    expect((await answered).output).toBe('The researcher says 42.');
    // The sub-agent: its lifecycle names its role and its parent, and its turn answered the task.
    const sub = await firstValueFrom(client.state$<AgentLifecycleState>('conv/c/agent/a.call_1_0').pipe(filter((s) => s.value === 'idle')));
    expect(sub).toMatchObject({ role: 'researcher', parentId: 'a' });
    const subTurn = await firstValueFrom(client.state$<TurnEngineState>('conv/c/agent/a.call_1_0/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    expect(subTurn).toMatchObject({ input: 'find the answer', output: '42' });
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
  });

  it('runs the autonomy loop offline: a plan spawned over the protocol is planned, run by agents of its roles, reviewed, and reaches goal_met', async () => {
    const tasks = [
      { id: 'draft', description: 'Draft the notes', ownerRole: 'writer' },
      { id: 'check', description: 'Check the notes', dependsOn: ['draft'], ownerRole: 'reviewer' },
    ];
    const { db, file } = configFile({
      models: {
        planning: { type: 'scripted', answers: [{ text: JSON.stringify({ tasks }) }] },
        judging: { type: 'scripted', answers: [{ text: '{"verdict":"pass","summary":"notes drafted and checked"}' }] },
        writing: { type: 'scripted', answers: [{ text: 'Notes drafted.' }] },
        checking: { type: 'scripted', answers: [{ text: 'Notes checked.' }] },
      },
      agents: { writer: { model: 'writing', description: 'Writes.' }, reviewer: { model: 'checking' } },
      defaultRole: 'writer',
      autonomy: { planner: 'planning', critic: 'judging', autoStart: true, parallelism: 2 },
    });
    const cli = runestream(['serve', '--port', '0', '--db', db, '--config', file]);
    const [, url] = await cli.line(LISTENING);
    const client = createClient({ url: url!, WebSocket });
    await client.spawn('conv/c/plan/p1', 'autonomy-loop', { goal: 'Release notes' });
    const done = await firstValueFrom(client.state$<AutonomyLoopState>('conv/c/plan/p1').pipe(filter((s) => s.value === 'goal_met' || s.value === 'stopped')));
    expect(done).toMatchObject({ value: 'goal_met', summary: 'notes drafted and checked' });
    expect(done.tasks.map((t) => [t.id, t.status, t.agentId, t.result])).toEqual([
      ['draft', 'done', 'writer-1', 'Notes drafted.'],
      ['check', 'done', 'reviewer-1', 'Notes checked.'],
    ]);
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
  });

  it('runs the configured agent CLIs: a session naming one runs it in its cwd (relative to the file) and its output reaches the client, with the UI flags beside the state', async () => {
    const fakeCli = join(process.cwd(), 'test/fixtures/cli/fake-cli.mjs');
    const { db, file } = configFile({
      models: { m: { type: 'demo' } },
      agents: { demo: { model: 'm' } },
      defaultRole: 'demo',
      clis: { fake: { protocol: 'ndjson', command: process.execPath, args: [fakeCli], cwd: 'work' } },
    });
    mkdirSync(join(dirname(file), 'work'));
    const cli = runestream(['serve', '--port', '0', '--db', db, '--config', file]);
    const [, url] = await cli.line(LISTENING);
    await cli.line(/^runestream: agent CLIs fake \(ndjson\): spawn any stream as "agent-manager-session"/m);
    const client = createClient({ url: url!, WebSocket });
    await client.spawn('session-1', 'agent-manager-session', { cli: 'fake', autoApprove: true });
    const done = firstValueFrom(client.state$<AgentManagerSessionState>('session-1').pipe(filter((s) => s.value === 'completed' || s.value === 'error')));
    // The NDJSON adapter puts the prompt last, where the fake CLI reads its steps: cline's lines, then exit 0.
    const steps = [
      { json: { type: 'task_started', taskId: 't1' } },
      { json: { ts: 1, type: 'say', say: 'api_req_started' } },
      { json: { ts: 2, type: 'say', say: 'completion_result', text: 'Done.' } },
      { exit: 0 },
    ];
    await client.dispatch('session-1', { type: 'start_session', prompt: JSON.stringify(steps) });
    expect(await done).toMatchObject({ value: 'completed', sessionId: 't1', lastText: 'Done.', exitCode: 0 });
    expect(await firstValueFrom(client.derived$<AgentManagerUiFlags>('session-1'))).toMatchObject({ showResumeButton: true, isActive: false });
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
  });

  it('refuses an autonomy planner that names no configured chain or model', () => {
    const config = (autonomy: object) => JSON.stringify({ models: { m: { type: 'demo' } }, agents: { a: { model: 'm' } }, defaultRole: 'a', autonomy });
    expect(() => parseServerConfig(config({ planner: 'gpt' }), 'x.json')).toThrow(
      'x.json: autonomy.planner: unknown chain or model "gpt"; the chains are (none), the models "m"',
    );
    expect(() => parseServerConfig(config({ planner: 'm', parallelism: 0 }), 'x.json')).toThrow(/^x\.json: autonomy\.parallelism: Too small/);
    expect(() => parseServerConfig(config({ planner: 'm', executingStallMs: 0 }), 'x.json')).toThrow(/^x\.json: autonomy\.executingStallMs: Too small/);
    expect(parseServerConfig(config({ planner: 'm', executingStallMs: 120_000 }), 'x.json').autonomy?.executingStallMs).toBe(120_000);
  });

  it("applies the default role's budget and the prices: a turn past the budget is interrupted naming the limit, and each response has its cost", async () => {
    const { db, file } = configFile({
      models: { canned: { type: 'scripted', answers: [{ toolCalls: [{ toolName: 'clock', input: {} }] }, { text: 'It is noon.' }] } },
      agents: { assistant: { model: 'canned', tools: ['clock'], budget: { modelCalls: 1 } } },
      defaultRole: 'assistant',
      prices: { canned: { inputPerMillion: 0, outputPerMillion: 1_000_000 } },
    });
    const cli = runestream(['serve', '--port', '0', '--db', db, '--config', file]);
    const [, url] = await cli.line(LISTENING);
    const client = createClient({ url: url!, WebSocket });
    await client.spawn('conv/c/agent/a/turn', 'turn-engine');
    const ended = firstValueFrom(client.state$<TurnEngineState>('conv/c/agent/a/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    const asked = firstValueFrom(client.runes$('conv/c/agent/a/turn').pipe(filter((r) => r.kind === 'turn.tool_calls_received')));
    await client.dispatch('conv/c/agent/a/turn', { type: 'start_turn', input: 'what time is it?' });
    expect((await ended).reason).toBe('agent budget exhausted: modelCalls 1 of 1');
    // One output token (the tool call) at 1 per token.
    expect((await asked).event).toMatchObject({ model: 'canned', cost: 1 });
    const lifecycle = await firstValueFrom(client.state$<AgentLifecycleState>('conv/c/agent/a').pipe(filter((s) => s.value === 'terminated')));
    expect(lifecycle.terminatedBy).toBe('budget_exhausted');
    await client.close();
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
  });

  it('exits 2 on a configuration that cannot be used, naming the file and the field; RUNESTREAM_CONFIG names the file too', async () => {
    const { db, file } = configFile({ models: { offline: { type: 'demo' } }, agents: { helper: { model: 'main' } }, defaultRole: 'helper' });
    const cli = runestream(['serve', '--port', '0', '--db', db], { RUNESTREAM_CONFIG: file });
    expect(await cli.exited).toBe(2);
    expect(cli.stderr).toBe(`runestream: ${file}: agents.helper.model: unknown chain or model "main"; the chains are (none), the models "offline"\n`);
    expect(cli.stdout).not.toMatch(LISTENING);

    const missing = runestream(['serve', '--port', '0', '--db', db, '--config', join(dirname(db), 'nope.json')]);
    expect(await missing.exited).toBe(2);
    expect(missing.stderr).toContain('nope.json: cannot be read: ENOENT');
  });

  it('exits 2 when a model’s API key variable is not set', async () => {
    const { db, file } = configFile({
      models: { cloud: { type: 'openai-compatible', baseURL: 'http://127.0.0.1:9/v1', model: 'm', apiKeyEnv: 'CLOUD_KEY' } },
      agents: { helper: { model: 'cloud' } },
      defaultRole: 'helper',
    });
    const cli = runestream(['serve', '--port', '0', '--db', db, '--config', file]);
    expect(await cli.exited).toBe(2);
    expect(cli.stderr).toContain(`${file}: models.cloud.apiKeyEnv: the environment variable CLOUD_KEY is not set`);
  });

  it('serves /metrics and writes the collector\'s snapshots to the configured file, relative to the configuration file; "enabled": false turns both off', async () => {
    const { db, file } = configFile({
      models: { offline: { type: 'demo' } },
      agents: { helper: { model: 'offline' } },
      defaultRole: 'helper',
      metrics: { flushEveryMs: 50, file: 'stats/metrics.json' },
    });
    const cli = runestream(['serve', '--port', '0', '--db', db, '--config', file]);
    const [, , , httpUrl] = await cli.line(LISTENING);
    const snapshotFile = join(dirname(file), 'stats', 'metrics.json');
    await cli.line(new RegExp(`^runestream: metrics at ${httpUrl!.replace(/[.]/g, '\\.')}/metrics; snapshots written to ${snapshotFile.replace(/[.]/g, '\\.')}$`, 'm'));
    // The collector's spawn is appended as the server starts: with the log in its own thread it may
    // still be on its way at the first scrape, so scrape until it is counted.
    const spawnCounted = /^runestream_runes_appended_total\{machine="metrics-collector",kind="spawned"\} 1$/m;
    let scraped = '';
    for (let i = 0; i < 200 && !spawnCounted.test(scraped); i++) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, 25)); // waits for another process's append, not a timing assertion
      const scrape = await fetch(`${httpUrl}/metrics`);
      expect(scrape.status).toBe(200);
      scraped = await scrape.text();
    }
    expect(scraped).toMatch(spawnCounted);
    // The collector runs in the server: RUNNING, flushing a snapshot every 50 ms.
    let snapshot: { at: number; metrics: { name: string }[] } | undefined;
    for (let i = 0; i < 200 && snapshot === undefined; i++) {
      if (existsSync(snapshotFile)) snapshot = JSON.parse(readFileSync(snapshotFile, 'utf8'));
      else await new Promise((resolve) => setTimeout(resolve, 25)); // waits for another process's file, not a timing assertion
    }
    expect(snapshot?.metrics.map((m) => m.name)).toContain('runestream_ws_connections');
    cli.child.kill('SIGTERM');
    expect(await cli.exited).toBe(0);

    const off = configFile({ models: { offline: { type: 'demo' } }, agents: { helper: { model: 'offline' } }, defaultRole: 'helper', metrics: { enabled: false } });
    const plain = runestream(['serve', '--port', '0', '--db', off.db, '--config', off.file]);
    const [, , , plainUrl] = await plain.line(LISTENING);
    expect((await fetchJson(`${plainUrl}/metrics`)).body).toMatchObject({ code: 'not_found' });
    plain.child.kill('SIGTERM');
    expect(await plain.exited).toBe(0);
  });
});

describe('parseCommand: the models of serve', () => {
  const parse = (args: string[], env: NodeJS.ProcessEnv = {}) => parseCommand(['serve', ...args], env);

  it('without flags serves the offline demo model as role "demo", with the built-in tools', () => {
    const { config, configSource } = parse([]) as Extract<ReturnType<typeof parse>, { command: 'serve' }>;
    expect(configSource).toBe('the offline demo');
    expect(config.models).toEqual({ demo: { type: 'demo' } });
    expect(config.agents.demo).toMatchObject({ model: 'demo', tools: ['clock', 'add', 'save_note'] });
  });

  it('--model (repeatable) and RUNESTREAM_MODELS make a chain, in order; OPENAI_BASE_URL is the base of a bare model id', () => {
    const env = { OPENAI_BASE_URL: 'http://127.0.0.1:8000/v1', OPENAI_API_KEY: 'k' };
    const fromFlags = parse(['--model', 'llama3.2:8b@http://127.0.0.1:11434/v1', '--model', 'qwen', '--model', 'demo'], env);
    expect(fromFlags).toMatchObject({
      configSource: '--model',
      config: {
        models: {
          'llama3.2_8b': { type: 'openai-compatible', baseURL: 'http://127.0.0.1:11434/v1', model: 'llama3.2:8b', apiKeyEnv: 'OPENAI_API_KEY' },
          qwen: { type: 'openai-compatible', baseURL: 'http://127.0.0.1:8000/v1', model: 'qwen', apiKeyEnv: 'OPENAI_API_KEY' },
          demo: { type: 'demo' },
        },
        chains: { models: { models: ['llama3.2_8b', 'qwen', 'demo'] } },
        agents: { demo: { model: 'models' } },
      },
    });
    expect(parse([], { RUNESTREAM_MODELS: 'a@http://127.0.0.1:1/v1, demo' })).toMatchObject({
      configSource: 'RUNESTREAM_MODELS',
      config: { chains: { models: { models: ['a', 'demo'] } } },
    });
    // Today's pair still works.
    expect(parse([], { OPENAI_BASE_URL: 'http://127.0.0.1:8000/v1', RUNESTREAM_MODEL: 'tiny' })).toMatchObject({
      configSource: 'RUNESTREAM_MODEL',
      config: { models: { tiny: { type: 'openai-compatible', model: 'tiny' } }, agents: { demo: { model: 'tiny' } } },
    });
  });

  it('refuses a bare model id with no base URL, --model beside a configuration file, and a bad URL', () => {
    expect(() => parse(['--model', 'qwen'])).toThrow(
      new ServerConfigError('--model', [
        { path: '', message: '"qwen" has no base URL: write <model>@<baseURL> (e.g. llama3.2@http://localhost:11434/v1) or set OPENAI_BASE_URL' },
      ]),
    );
    expect(() => parse(['--model', 'demo', '--config', 'x.json'])).toThrow(new UsageError('--model and a configuration file are both given: name the models in the file'));
    expect(() => parse(['--model', 'm@http://'])).toThrow(ServerConfigError);
  });

  it('--help documents the configuration flags and variables', async () => {
    const cli = runestream(['--help']);
    expect(await cli.exited).toBe(0);
    for (const text of ['--config <file>', '--model <spec>', 'RUNESTREAM_CONFIG', 'RUNESTREAM_MODELS', 'OPENAI_BASE_URL', 'apiKeyEnv', 'Retry-After'])
      expect(cli.stdout).toContain(text);
  });
});
