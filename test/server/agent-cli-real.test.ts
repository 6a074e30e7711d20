import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { filter, firstValueFrom, throwError, timeout } from 'rxjs';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { agentCliSessions, type AgentCliSpec } from '../../src/agents.js';
import { cliAdapters } from '../../src/effects/cli/cli-adapters.js';
import { createEngine, type AgentManagerSessionState, type AgentManagerUiFlags, type Engine, type EngineError, type Rune } from '../../src/index.js';
import { createClient, type RunestreamClient } from '../../src/server/client/index.js';
import { createServer, type RunestreamServer } from '../../src/server/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { type ChatCompletionsServer, startChatCompletionsServer } from '../support/chat-completions-server.js';
import { CLINE_BIN, clineAnswers, clineEnv, clineVersion } from '../support/cline.js';
import { KILO_BIN, kiloEnv, kiloModel } from '../support/kilo.js';
import { alive, descendants } from '../support/process-tree.js';

/**
 * Issue 13's "real processes": the pinned cline 2.18.0 (NDJSON) and kilo 7.7.7 (ACP) run as the
 * processes of `agent-manager-session` streams, by `agentCliSessions` in an engine on a SQLite file
 * behind `createServer` on 127.0.0.1, driven by `runestream/client` over WebSocket; the model is
 * the scripted chat-completions server on 127.0.0.1.
 */

let scratch: string | undefined;
let model: ChatCompletionsServer | undefined;
let engine: Engine | undefined;
let server: RunestreamServer | undefined;
let client: RunestreamClient | undefined;
/** Every CLI process seen, and what it started: none may outlive the test. */
const seen = new Set<number>();

afterEach(async () => {
  await client?.close();
  await server?.close();
  await engine?.close(); // ends the sessions' processes
  for (const pid of [...seen, ...cliProcesses()]) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  seen.clear();
  await model?.close();
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  scratch = model = engine = server = client = undefined;
});

/** The processes below this one working in the scratch folder: the CLIs and what they started. */
function cliProcesses(): number[] {
  if (scratch === undefined) return [];
  const roots = descendants(process.pid).filter((pid) => {
    try {
      return readlinkSync(`/proc/${pid}/cwd`).startsWith(scratch!);
    } catch {
      return false;
    }
  });
  const found = [...new Set([...roots, ...roots.flatMap(descendants)])];
  for (const pid of found) seen.add(pid);
  return found.filter(alive);
}

/** An engine on a SQLite file in the scratch folder running `clis`, its server, and a client of it. */
async function serveClis(clis: Record<string, AgentCliSpec>) {
  engine = createEngine({ store: sqliteStore(join(scratch!, 'runestream.db')), epics: [agentCliSessions({ clis })] });
  const errors: EngineError[] = [];
  engine.errors$.subscribe((error) => errors.push(error));
  server = await createServer({ engine, port: 0 });
  client = createClient({ url: server.url, WebSocket });
  return { client, errors };
}

/** The session's states as the client sees them (each change once), and a wait for one. */
async function watch(client: RunestreamClient, stream: string) {
  const runes: Rune[] = [];
  client.runes$(stream).subscribe((rune) => runes.push(rune));
  const state$ = client.state$<AgentManagerSessionState>(stream);
  await firstValueFrom(state$); // subscribed: the runes from here on reach `runes`
  const path = () => runes.map((rune) => rune.to).filter((to, i, all) => to !== all[i - 1]);
  return {
    runes,
    // Not a timing assertion: a CLI that hangs fails with what the session did, before the test's own timeout says nothing.
    until: (test: (state: AgentManagerSessionState) => boolean, waitMs = 200_000) =>
      firstValueFrom(
        state$.pipe(
          filter(test),
          timeout({
            first: waitMs,
            with: () =>
              throwError(
                () => new Error(`the session never got there; it went ${path().join(' -> ')}; its last runes: ${JSON.stringify(runes.slice(-6).map((rune) => rune.event))}`),
              ),
          }),
        ),
      ),
    path,
  };
}

/** What went wrong besides the output lines the adapters ignore (cline prints many it has no event for). */
const problems = (errors: readonly EngineError[]) => errors.filter((error) => error.type !== 'output_ignored');

const envOf = (env: NodeJS.ProcessEnv): Record<string, string> => Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined));

describe('real agent CLIs through the runestream server, driven by a WebSocket client', () => {
  /** A cline session that wrote hello.txt with its own tool and completed, on a scripted model. */
  async function clineCompleted() {
    expect(clineVersion()).toBe('2.18.0');
    const replies = [clineAnswers.writeFile, clineAnswers.complete, { text: '<attempt_completion>\n<result>\nBye now.\n</result>\n</attempt_completion>' }];
    // Answered by what the conversation holds, not by request count: a request cline repeats (a retry on a
    // slow machine) gets the same answer instead of shifting the script. A `-T` run sends the earlier task
    // condensed (its completion left out), so the follow-up is known by its text.
    model = await startChatCompletionsServer((request) => {
      const messages = request.messages ?? [];
      if (JSON.stringify(messages).includes('Now say bye')) return replies[2]!;
      const answered = messages.filter((message) => (message as { role?: string }).role === 'assistant').length;
      return replies[Math.min(answered, 1)]!;
    });
    scratch = mkdtempSync(join(tmpdir(), 'runestream-cline-e2e-'));
    const cwd = join(scratch, 'work');
    mkdirSync(cwd);
    const env = envOf(await clineEnv(join(scratch, 'home'), model.baseURL));
    const { client, errors } = await serveClis({ cline: { adapter: cliAdapters.ndjson, command: CLINE_BIN, env, cwd } });

    await client.spawn('session-1', 'agent-manager-session', { cli: 'cline', autoApprove: true });
    const session = await watch(client, 'session-1');
    await client.dispatch('session-1', { type: 'start_session', prompt: 'Write hello.txt' });
    const first = await session.until((s) => s.value === 'completed' && s.exitCode !== undefined);
    expect(first).toMatchObject({ exitCode: 0, lastText: 'I wrote hello.txt.' });
    expect(readFileSync(join(cwd, 'hello.txt'), 'utf8')).toBe('hello from cline');
    return { client, errors, session };
  }

  it('cline 2.18.0 (NDJSON, auto-approve): writes a file with its own tool and completes; the process exits and nothing it started is left', {
    timeout: 300_000,
  }, async () => {
    const { errors, session } = await clineCompleted();
    expect(session.path()).toEqual(['creating', 'streaming', 'completed']);
    expect(session.runes.filter((rune) => rune.event.type === 'process_exit').map((rune) => rune.event)).toEqual([{ type: 'process_exit', code: 0 }]);
    expect(problems(errors)).toEqual([]);
    expect(cliProcesses()).toEqual([]);
  });

  // On a loaded machine cline 2.18's `-T` follow-up run sometimes prints the task's history and
  // `ask:resume_task`, then goes silent (seen 4 times in 4 with two other busy processes, never on an
  // idle machine; the same before the simulation's work): a race in cline that the real-CLI seams
  // issue (28) takes up. The follow-up waits 90 s and the test is tried up to 3 times, so the race
  // fails it only when it recurs each time; each failure says where the session stopped.
  it('cline 2.18.0 (NDJSON): a follow-up is answered in a new process (-T), both exit 0', { timeout: 300_000, retry: 2 }, async () => {
    const { client, errors, session } = await clineCompleted();
    await client.dispatch('session-1', { type: 'send_message', text: 'Now say bye.' });
    const second = await session.until((s) => s.value === 'completed' && s.lastText === 'Bye now.', 90_000); // a one-shot CLI completes when it exits
    expect(second.exitCode).toBe(0);
    expect(session.path()).toEqual(['creating', 'streaming', 'completed', 'streaming', 'completed']);
    expect(session.runes.filter((rune) => rune.event.type === 'process_exit').map((rune) => rune.event)).toEqual([
      { type: 'process_exit', code: 0 },
      { type: 'process_exit', code: 0 },
    ]);
    expect(model!.requests.length).toBeGreaterThanOrEqual(3);
    expect(problems(errors)).toEqual([]);
    expect(cliProcesses()).toEqual([]); // both processes exited, and nothing they started is left
  });

  it('kilo 7.7.7 (ACP): the client approves the write, a follow-up is answered by the same process, cancel_session ends its tree', { timeout: 120_000 }, async () => {
    scratch = mkdtempSync(join(tmpdir(), 'runestream-kilo-e2e-'));
    const cwd = join(scratch, 'work');
    mkdirSync(cwd);
    model = await startChatCompletionsServer(kiloModel(cwd)); // asks to write hello.txt, then bye.txt when told to
    const spec: AgentCliSpec = { adapter: cliAdapters.acp, command: KILO_BIN, args: ['acp'], env: kiloEnv(scratch, model.baseURL), cwd, killGraceMs: 2_000 };
    const { client, errors } = await serveClis({ kilo: spec });

    await client.spawn('session-1', 'agent-manager-session', { cli: 'kilo', autoApprove: false });
    const session = await watch(client, 'session-1');
    await client.dispatch('session-1', { type: 'start_session', prompt: 'Create hello.txt saying hello.' });
    await session.until((s) => s.value === 'waiting_approval');
    expect(await firstValueFrom(client.derived$<AgentManagerUiFlags>('session-1'))).toMatchObject({ showCancelButton: true, showSpinner: false });
    expect(existsSync(join(cwd, 'hello.txt'))).toBe(false); // it waits for the approval
    const [kilo] = cliProcesses(); // the first found is the one the epic spawned (a process lists before its children)
    expect(kilo).toBeDefined();

    await client.dispatch('session-1', { type: 'approve_action' });
    expect((await session.until((s) => s.value === 'completed')).lastText).toBe('I created hello.txt.');
    expect(readFileSync(join(cwd, 'hello.txt'), 'utf8')).toBe('hello from kilo\n');

    await client.dispatch('session-1', { type: 'send_message', text: 'Now say bye.' });
    expect((await session.until((s) => s.value === 'completed' && s.lastText === 'Bye now.')).exitCode).toBeUndefined();
    expect(alive(kilo!)).toBe(true); // the same process answered: it is still there
    expect(session.runes.filter((rune) => rune.event.type === 'session_created')).toHaveLength(1);

    // Another write asks again; the user cancels instead of answering.
    await client.dispatch('session-1', { type: 'send_message', text: 'Write bye.txt' });
    await session.until((s) => s.value === 'waiting_approval');
    cliProcesses(); // everything it started meanwhile, too
    const tree = [...seen];
    await client.dispatch('session-1', { type: 'cancel_session' });
    await session.until((s) => s.value === 'stopped');
    await vi.waitFor(() => expect(tree.filter(alive)).toEqual([]), { timeout: 15_000, interval: 100 });
    expect(existsSync(join(cwd, 'bye.txt'))).toBe(false);

    expect(session.path()).toEqual([
      'creating',
      'streaming',
      'waiting_approval',
      'streaming',
      'completed',
      'streaming',
      'completed',
      'streaming',
      'waiting_approval',
      'stopped',
    ]);
    expect(problems(errors)).toEqual([]);
  });
});
