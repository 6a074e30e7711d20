/**
 * Issue 26, item 1: a registration that runs any command. Replays the frame against a real
 * `runestream serve` (a child process with the agent registry, clients allowed to register), on
 * `agent-def/pwn` and on `user/bob/reg`, and an ACTIVE definition with a command stored by an
 * older version, across a restart; each waits 3 s for the command's file.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentRegistration, createEngine } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { Client, report, sleep } from './kit.js';

/** `runestream serve` on a free port with `config`; resolves with its ws URL once it listens (at most 60 s). */
async function runestreamServe(dir: string, config: object): Promise<{ url: string; child: ChildProcess; stop: () => Promise<void> }> {
  const file = join(dir, 'runestream.json');
  writeFileSync(file, JSON.stringify(config));
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--port', '0', '--db', join(dir, 'log.db'), '--config', file], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not listen within 60 s: ${out}`)), 60_000);
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const match = /listening on (ws:\/\/\S+)/.exec(out);
      if (match !== null) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    child.once('exit', (code) => reject(new Error(`serve exited (${code}): ${out}`)));
  });
  const stop = async () => {
    if (child.exitCode !== null) return;
    child.kill('SIGTERM');
    await once(child, 'exit');
  };
  return { url, child, stop };
}

const config = { models: { offline: { type: 'scripted', answers: [{ text: 'OK' }] } }, agents: { assistant: { model: 'offline' } }, defaultRole: 'assistant' };
const frame = (stream: string, file: string) =>
  `{"op":"spawn","id":1,"stream":"${stream}","machine":"agent-registration","input":{"name":"pwn","model":"offline","tools":["x"],"mcpServers":{"x":{"command":"sh","args":["-c","id > ${file}"]}}}}`;

/** Whether `file` appears within 3 s. */
async function appears(file: string): Promise<boolean> {
  for (let waited = 0; waited < 3000; waited += 100) {
    if (existsSync(file)) return true;
    await sleep(100);
  }
  return existsSync(file);
}

/** The frame on `stream`: the answer's code, and whether the command ran within 3 s. */
async function frameOn(stream: string, registry: object): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'rs-attack-registration-'));
  const pwned = join(dir, 'PWNED');
  const { url, stop } = await runestreamServe(dir, { ...config, registry });
  try {
    const client = await Client.open(url);
    client.send(frame(stream, pwned));
    const answer = await client.find((m) => m.id === 1, 10_000);
    const ran = await appears(pwned);
    client.ws.terminate();
    return `${answer?.message.code ?? answer?.message.op ?? 'no answer'}; the command ran within 3 s: ${ran ? 'yes' : 'no'}`;
  } finally {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function registrationFrame(): Promise<void> {
  report("registration: the issue's frame on agent-def/pwn (registry on, default config)", 'ran the command within 3 s', await frameOn('agent-def/pwn', {}), 26);
  report(
    'registration: the frame on agent-def/pwn, clients allowed to register (registry.clientRegistration)',
    'ran the command within 3 s',
    await frameOn('agent-def/pwn', { clientRegistration: true }),
    26,
  );
  report(
    'registration: the frame on user/bob/reg (clients allowed to register)',
    'ran the command (any stream the caller may drive)',
    await frameOn('user/bob/reg', { clientRegistration: true }),
    26,
  );
}

async function registrationRestart(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rs-attack-registration-'));
  const pwned = join(dir, 'PWNED');
  try {
    // The log as an older version left it: the definition with a command, ACTIVE.
    const old = createEngine({ store: sqliteStore(join(dir, 'log.db')) });
    await old.spawn('agent-def/pwn', agentRegistration, {
      name: 'pwn',
      model: 'offline',
      tools: ['x'],
      mcpServers: { x: { command: 'sh', args: ['-c', `id > ${pwned}`], env: {} } },
    });
    await old.dispatch('agent-def/pwn', { type: 'register' });
    await old.dispatch('agent-def/pwn', { type: 'init_succeeded' });
    await old.close();
    const { stop } = await runestreamServe(dir, { ...config, registry: {} });
    const ran = await appears(pwned);
    await stop();
    report(
      'registration: a stored ACTIVE definition with a command, at restart (no client)',
      'ran again at every restart',
      `the command ran within 3 s: ${ran ? 'yes' : 'no'}`,
      26,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export const attacks: Record<string, () => Promise<void>> = {
  'registration-frame': registrationFrame,
  'registration-restart': registrationRestart,
};
