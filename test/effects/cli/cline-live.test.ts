import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fromEvent, lastValueFrom, NEVER, takeUntil, toArray, type Observable } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { ndjsonCliAdapter } from '../../../src/effects/cli/ndjson-adapter.js';
import type { CliRun } from '../../../src/effects/cli/cli-adapter.js';
import { agentManagerSession, type AgentManagerSessionEvent } from '../../../src/index.js';
import { splitLines } from '../../../src/streams/split-lines.js';
import { startChatCompletionsServer, type ChatCompletionsServer } from '../../support/chat-completions-server.js';
import { CLINE_BIN, clineAnswers, clineEnv, clineVersion } from '../../support/cline.js';

let server: ChatCompletionsServer | undefined;
let child: ChildProcess | undefined;
let scratch: string | undefined;

afterEach(async () => {
  // The whole process group: cline and anything it started.
  if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
  await server?.close();
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  child = server = scratch = undefined;
});

describe('the real cline 2.18.0 through ndjsonCliAdapter', () => {
  it('writes a file in a scratch folder with its own tool, and its events fold to completed', { timeout: 90_000 }, async () => {
    expect(clineVersion()).toBe('2.18.0');
    const replies = [clineAnswers.writeFile, clineAnswers.complete];
    server = await startChatCompletionsServer((_, index) => replies[Math.min(index, replies.length - 1)]!);
    scratch = mkdtempSync(join(tmpdir(), 'cline-live-'));
    const cwd = join(scratch, 'work');
    mkdirSync(cwd);
    const env = await clineEnv(join(scratch, 'home'), server.baseURL);

    const run: CliRun = { start: { type: 'new_task', prompt: 'Write hello.txt' }, autoApprove: true, cwd };
    const launch = ndjsonCliAdapter.launch(run);
    const spawned = spawn(CLINE_BIN, launch.args, { cwd, env, stdio: ['pipe', 'pipe', 'ignore'], detached: true });
    child = spawned;
    if (launch.endStdin === true) spawned.stdin!.end();
    const exited = new Promise<number | null>((resolve) => spawned.on('exit', resolve));
    const lines$ = (fromEvent(spawned.stdout!, 'data') as Observable<Buffer>).pipe(takeUntil(fromEvent(spawned.stdout!, 'end')), splitLines());
    const outputs = await lastValueFrom(ndjsonCliAdapter.drive({ lines$, write: () => {}, end: () => {} }, run, NEVER).pipe(toArray()));
    const code = await exited;

    expect(readFileSync(join(cwd, 'hello.txt'), 'utf8')).toBe('hello from cline');
    expect(existsSync(join(cwd, '..', 'hello.txt'))).toBe(false);
    const events: AgentManagerSessionEvent[] = [
      { type: 'start_session', prompt: 'Write hello.txt' },
      ...outputs.flatMap((output) => ('event' in output ? [output.event] : [])),
      { type: 'process_exit', code: code ?? -1 },
    ];
    let state = agentManagerSession.initial({ autoApprove: true });
    const path: string[] = [];
    for (const event of events) {
      const step = agentManagerSession.step(state, event);
      expect(step.accepted, `${state.value} + ${event.type}`).toBe(true);
      state = step.state;
      if (path.at(-1) !== state.value) path.push(state.value);
    }
    expect(path).toEqual(['creating', 'streaming', 'completed']);
    expect(state).toMatchObject({ exitCode: 0, lastText: 'I wrote hello.txt.' });
    expect(server.requests.length).toBe(2);
  });
});
