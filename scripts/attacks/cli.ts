/**
 * Issue 26 item 5, agent CLIs: one client starting CLI processes without end, and a CLI whose
 * output floods serve's log. The CLI is the fake of the tests (`test/fixtures/cli/fake-cli.mjs`,
 * plain node), run as a real process per session.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { map } from 'rxjs';
import { WebSocket } from 'ws';
import { agentCliSessions, cliSessionOwners, type AgentCliAdapter } from '../../src/agents.js';
import { parseCommand } from '../../src/cli/args.js';
import { logServing } from '../../src/cli/serve-log.js';
import { serve as runestreamServe } from '../../src/cli/serve.js';
import { createEngine, type AgentManagerSessionEvent, type Engine, type EngineError } from '../../src/index.js';
import { createClient, type RunestreamClient } from '../../src/server/client/index.js';
import { createServer } from '../../src/server/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { report, sleep } from './kit.js';

const FAKE_CLI = fileURLToPath(new URL('../../test/fixtures/cli/fake-cli.mjs', import.meta.url));

/** The fake CLI's processes below this one, running now. */
function fakeProcesses(): number {
  let count = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z' || Number(fields[1]) !== process.pid) continue;
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('fake-cli.mjs')) count++;
    } catch {
      // it ended meanwhile
    }
  }
  return count;
}

/** Waits until `condition` holds, or `ms` pass; whether it held. */
async function until(condition: () => boolean, ms: number): Promise<boolean> {
  const deadline = performance.now() + ms;
  while (!condition()) {
    if (performance.now() >= deadline) return false;
    await sleep(50);
  }
  return true;
}

/** Starts `count` sessions as `client` (streams `prefix/<i>`), each asking the fake to run until it is ended. */
async function startSessions(client: RunestreamClient, prefix: string, count: number): Promise<void> {
  const hang = JSON.stringify([{ hang: true }]); // the prompt: the ndjson adapter passes it last, the fake runs it
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      await client.spawn(`${prefix}/${i}`, 'agent-manager-session', { cli: 'fake', autoApprove: true });
      await client.dispatch(`${prefix}/${i}`, { type: 'start_session', prompt: hang });
    }),
  );
}

/** How many of the engine's sessions `prefix/<i>` ended in error with too_many_sessions. */
async function refused(engine: Engine, prefix: string, count: number): Promise<number> {
  let n = 0;
  for (let i = 0; i < count; i++) {
    const state = (await engine.snapshot<{ value: string; error?: string }>(`${prefix}/${i}`))?.state;
    if (state?.value === 'error' && state.error?.startsWith('too_many_sessions:') === true) n++;
  }
  return n;
}

/** 300 sessions started by one token holder of `runestream serve` (its defaults: 16 in all, 4 per identity). */
async function cliSessions(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-attack-cli-'));
  const config = join(dir, 'runestream.json');
  writeFileSync(
    config,
    JSON.stringify({
      models: { demo: { type: 'demo' } },
      agents: { helper: { model: 'demo' } },
      defaultRole: 'helper',
      clis: { fake: { protocol: 'ndjson', command: process.execPath, args: [FAKE_CLI], cwd: dir, killGraceMs: 200 } },
      metrics: { enabled: false },
      telemetry: { enabled: false },
      log: { level: 'silent' },
    }),
  );
  const command = parseCommand(['serve', '--port', '0', '--db', join(dir, 'runestream.db'), '--config', config, '--token', 'attacker-token'], {});
  if (command.command !== 'serve') throw new Error('not a serve command');
  const serving = await runestreamServe(command, { log: () => undefined, error: () => undefined });
  const client = createClient({ url: serving.server.url, token: 'attacker-token', WebSocket });
  const sessions = 300;
  try {
    await startSessions(client, 'attack', sessions);
    const settled = await until(() => fakeProcesses() >= 4, 10_000);
    await sleep(500); // any process past the cap would have started by now
    const running = fakeProcesses();
    const refusedCount = await refused(serving.engine, 'attack', sessions);
    report(
      '26.5d. agent CLI sessions: one token holder starts 300 sessions (runestream serve, defaults)',
      'one client started 300 CLI processes',
      `${running} CLI processes running (maxSessionsPerIdentity 4${settled ? '' : '; not all up within 10 s'}), ${refusedCount} of ${sessions} sessions error too_many_sessions, each with no process`,
      26,
    );
  } finally {
    await client.close();
    await serving.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** 10 identities each starting 30 sessions: the total cap (16). */
async function cliSessionsTotal(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-attack-cli-'));
  const owners = cliSessionOwners();
  const adapter: AgentCliAdapter = {
    protocol: 'ndjson',
    interactive: false,
    launch: (run) => ({ args: [FAKE_CLI, run.start.type === 'new_task' ? run.start.prompt : '[]'] }),
    drive: (io) => io.lines$.pipe(map(() => ({ ignored: 'not read here' }))),
  };
  const engine = createEngine({
    store: sqliteStore(join(dir, 'runestream.db')),
    epics: [agentCliSessions({ clis: { fake: { adapter, command: process.execPath, cwd: dir, killGraceMs: 200 } }, owners })],
  });
  const server = await createServer({ engine, port: 0, verify: ({ token }) => (token?.startsWith('user-') === true ? { id: token } : undefined), onDrive: owners.driven });
  const clients = Array.from({ length: 10 }, (_, i) => createClient({ url: server.url, token: `user-${i}`, WebSocket }));
  try {
    await Promise.all(clients.map((client, i) => startSessions(client, `user-${i}`, 30)));
    const settled = await until(() => fakeProcesses() >= 16, 10_000);
    await sleep(500);
    const running = fakeProcesses();
    let refusedCount = 0;
    for (let i = 0; i < clients.length; i++) refusedCount += await refused(engine, `user-${i}`, 30);
    report(
      '26.5e. agent CLI sessions: 10 identities start 30 sessions each (defaults: 16 in all, 4 per identity)',
      'one client started 300 CLI processes',
      `${running} CLI processes running (maxRunningSessions 16${settled ? '' : '; not all up within 10 s'}), ${refusedCount} of 300 sessions error too_many_sessions, each with no process`,
      26,
    );
  } finally {
    for (const client of clients) await client.close();
    await server.close();
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A CLI printing 5,000 events of 10 KB its session refuses, under serve's log (its defaults: 10 lines of a kind per 10 s). */
async function cliLogFlood(): Promise<void> {
  const lines = 5000;
  // The CLI: node printing its session's start, then 5,000 events of 10 KB the session refuses.
  const script = `const say = (e) => console.log(JSON.stringify(e));
say({ type: 'session_created', sessionId: 't' });
say({ type: 'api_req_started' });
for (let i = 0; i < ${lines}; i++) say({ type: 'approve_action', pad: 'x'.repeat(10000) });
say({ type: 'ask:completion_result' });`;
  const dir = mkdtempSync(join(tmpdir(), 'runestream-attack-cli-'));
  // Every JSON line is an event, as a misbehaving CLI's adapter would hand it on.
  const adapter: AgentCliAdapter = {
    protocol: 'ndjson',
    interactive: false,
    launch: () => ({ args: ['-e', script] }),
    drive: (io) => io.lines$.pipe(map((line) => ({ event: JSON.parse(line) as AgentManagerSessionEvent }))),
  };
  const engine = createEngine({ epics: [agentCliSessions({ clis: { fake: { adapter, command: process.execPath, cwd: dir } }, defaultCli: 'fake' })] });
  let written = 0;
  let bytes = 0;
  const logger = pino({ level: 'info' }, { write: (line: string) => void ((written += 1), (bytes += Buffer.byteLength(line))) });
  const stop = logServing(engine, logger); // serve's defaults
  let rejected = 0;
  engine.errors$.subscribe((error: EngineError) => void (error.type === 'command_rejected' && rejected++));
  try {
    await engine.spawn('flood', 'agent-manager-session', { autoApprove: true });
    await engine.dispatch('flood', { type: 'start_session', prompt: 'go' });
    const done = await until(() => rejected >= lines, 50_000);
    stop(); // ends the window: its summary line is written
    report(
      '26.5f. serve log: a CLI prints 5,000 events of 10 KB its session refuses (log defaults: 10 a kind per 10 s)',
      'a misbehaving CLI made serve write 871 MB of error log lines',
      `${rejected} refused${done ? '' : ' (not all within 50 s)'}: ${written} log lines, ${(bytes / 1024).toFixed(1)} KiB written (the last: "... repeated ${Math.max(0, rejected - 10)} more times")`,
      26,
    );
  } finally {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export const attacks: Record<string, () => Promise<void>> = {
  'cli-sessions': cliSessions,
  'cli-sessions-total': cliSessionsTotal,
  'cli-log-flood': cliLogFlood,
};
