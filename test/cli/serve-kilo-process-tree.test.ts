import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { filter, firstValueFrom, throwError, timeout } from 'rxjs';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AgentManagerSessionState } from '../../src/index.js';
import { createClient, type RunestreamClient } from '../../src/server/client/index.js';
import { type ChatCompletionsServer, type ChatRequest, type ScriptedReply, startChatCompletionsServer } from '../support/chat-completions-server.js';
import { KILO_BIN, kiloEnv } from '../support/kilo.js';
import { alive, descendants, killProcessesWith, processesWith } from '../support/process-tree.js';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../support/runestream-process.js';

/**
 * Issue 28 (b): the real kilo 7.7.7 run by a real `runestream serve`, whose bash tool (its
 * permission answered over ACP) starts a command that leaves kilo's process group and session on
 * purpose, `setsid sh -c 'sleep … >/dev/null 2>&1 & echo $!'` (its output elsewhere, so that
kilo's tool does not wait for the sleeper's end), as kilo starts every command in a group of its own.
 * Whatever kilo started ends with it, looked for under /proc: after `cancel_session`, and after
 * the server running the session was killed with SIGKILL.
 */

let model: ChatCompletionsServer | undefined;
let client: RunestreamClient | undefined;
/** What a test started: none may outlive it, whatever it asserted. */
const markers: string[] = [];
const seen: number[] = [];
afterEach(async () => {
  await client?.close();
  cleanUpProcesses();
  for (const marker of markers.splice(0)) killProcessesWith(marker);
  for (const pid of seen.splice(0)) {
    try {
      if (alive(pid)) process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  await model?.close();
  model = client = undefined;
});

/**
 * The scripted model: a bash call starting a sleeper of its own session (`sleep <seconds>`, the
 * seconds unique to the test so /proc finds it by them), then, once it ran, another bash call,
 * which waits for approval, so the session is in `waiting_approval` with the sleeper running.
 */
const escapingModel =
  (seconds: string) =>
  (request: ChatRequest): ScriptedReply => {
    if (!Array.isArray(request.tools) || request.tools.length === 0) return { text: 'Scripted title' }; // kilo's title request
    const ran = (request.messages ?? []).filter((message) => (message as { role?: string }).role === 'tool').length;
    if (ran === 0)
      return {
        toolCalls: [{ id: 'call_escape', name: 'bash', arguments: { command: `setsid sh -c 'sleep ${seconds} >/dev/null 2>&1 & echo $!'`, description: 'Starts a sleeper' } }],
      };
    if (ran === 1) return { toolCalls: [{ id: 'call_next', name: 'bash', arguments: { command: 'echo next', description: 'Says next' } }] };
    return { text: 'Done.' };
  };

/** A process's command line ('' once it ended). */
const cmdlineOf = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
};

/** The session id of a process (/proc/<pid>/stat: after the command, state, ppid, pgrp, session). */
const sessionOf = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[3]);
};

/** `runestream serve` running kilo (ACP) on the escaping model; a session of it waits for its second approval, its sleeper running. */
async function sessionWithSleeper() {
  const seconds = `1000.${Math.floor(Math.random() * 1e6)}`;
  markers.push(seconds);
  const db = tempDb();
  const scratch = dirname(db);
  const cwd = join(scratch, 'work');
  mkdirSync(cwd);
  model = await startChatCompletionsServer(escapingModel(seconds));
  const config = join(scratch, 'runestream.json');
  writeFileSync(
    config,
    JSON.stringify({
      models: { offline: { type: 'demo' } },
      agents: { assistant: { model: 'offline' } },
      defaultRole: 'assistant',
      clis: { kilo: { protocol: 'acp', command: KILO_BIN, args: ['acp'], env: kiloEnv(scratch, model.baseURL), cwd, killGraceMs: 2_000 } },
    }),
  );
  const serve = runestream(['serve', '--port', '0', '--db', db, '--config', config]);
  const [, url] = await serve.line(LISTENING);
  await serve.line(/^runestream: agent CLIs kilo \(acp\)/m);
  client = createClient({ url: url!, WebSocket });
  await client.spawn('session-1', 'agent-manager-session', { cli: 'kilo', autoApprove: false });
  const states: string[] = [];
  const state$ = client.state$<AgentManagerSessionState>('session-1');
  state$.subscribe((state) => states.at(-1) !== state.value && states.push(state.value));
  // Not a timing assertion: a kilo that hangs fails with where the session stopped, before the test's own timeout says nothing.
  const until = (test: (state: AgentManagerSessionState) => boolean) =>
    firstValueFrom(
      state$.pipe(
        filter(test),
        timeout({ first: 90_000, with: () => throwError(() => new Error(`the session went ${states.join(' -> ')}; the model had ${model?.requests.length} requests`)) }),
      ),
    );
  await client.dispatch('session-1', { type: 'start_session', prompt: 'Start the sleeper.' });
  await until((state) => state.value === 'waiting_approval');
  await client.dispatch('session-1', { type: 'approve_action' });
  await until((state) => state.value === 'waiting_approval' && state.lastText === 'echo next');
  // The CLI's process: the server's child that runs kilo (through unshare, on Linux), and all below it.
  const cli = descendants(serve.child.pid!).filter((pid) => cmdlineOf(pid).includes(KILO_BIN));
  const tree = [...new Set([...cli, ...cli.flatMap(descendants)])];
  seen.push(...tree);
  expect(cli.length).toBeGreaterThan(0);
  const [sleeper] = processesWith(seconds);
  expect(sleeper).toBeDefined();
  expect(sessionOf(sleeper!)).not.toBe(sessionOf(cli[0]!)); // it left kilo's session (and group)
  return { serve, client, seconds, tree, states, until };
}

describe('runestream serve with the real kilo 7.7.7: a command kilo started in a session of its own ends with kilo', () => {
  it('after cancel_session', { timeout: 180_000 }, async () => {
    const { serve, client, seconds, tree, until } = await sessionWithSleeper();
    await client.dispatch('session-1', { type: 'cancel_session' });
    await until((state) => state.value === 'stopped');
    await vi.waitFor(() => expect([...tree.filter(alive), ...processesWith(seconds)]).toEqual([]), { timeout: 15_000, interval: 200 });
    expect(serve.stdout).toMatch(/^runestream: each agent CLI runs in a PID namespace of its own: whatever it starts ends with it$/m);
  });

  it('after the server running the session was killed with SIGKILL', { timeout: 180_000 }, async () => {
    const { serve, seconds, tree } = await sessionWithSleeper();
    serve.child.kill('SIGKILL');
    await serve.exited;
    // Its watchdog ends kilo's group (SIGTERM, then SIGKILL after killGraceMs), and the namespace with it.
    await vi.waitFor(() => expect([...tree.filter(alive), ...processesWith(seconds)]).toEqual([]), { timeout: 20_000, interval: 200 });
  });
});
