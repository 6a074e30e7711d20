import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Observable } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import type { CliProcessIo } from '../../../src/effects/cli/cli-adapter.js';
import { splitLines } from '../../../src/streams/split-lines.js';
import { foldAcpSession } from '../../support/acp-session.js';
import { type ChatCompletionsServer, startChatCompletionsServer } from '../../support/chat-completions-server.js';
import { KILO_BIN, kiloEnv, kiloModel } from '../../support/kilo.js';
import { alive, descendants } from '../../support/process-tree.js';

/** The real kilo 7.7.7 (`kilo acp`) driven by the ACP adapter, against the scripted model on 127.0.0.1. */
describe('acpCliAdapter with the real kilo 7.7.7', () => {
  let server: ChatCompletionsServer | undefined;
  let child: ChildProcess | undefined;
  let scratch: string | undefined;
  afterEach(async () => {
    // kilo runs in its own process group: whatever it started goes with it.
    if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(-child.pid, 'SIGKILL');
    await server?.close();
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  it('writes a file after the permission is approved through user$, answers a follow-up, and leaves no process behind', async () => {
    scratch = mkdtempSync(join(tmpdir(), 'kilo-acp-'));
    const cwd = join(scratch, 'cwd');
    mkdirSync(cwd);
    server = await startChatCompletionsServer(kiloModel(cwd));
    const kilo = spawn(KILO_BIN, ['acp'], { cwd, env: kiloEnv(scratch, server.baseURL), stdio: ['pipe', 'pipe', 'ignore'], detached: true });
    child = kilo;
    const exited = new Promise<number | null>((resolve) => kilo.on('exit', (code) => resolve(code)));
    const io: CliProcessIo = {
      lines$: new Observable<Buffer>((subscriber) => {
        kilo.stdout?.on('data', (chunk: Buffer) => subscriber.next(chunk));
        kilo.stdout?.on('end', () => subscriber.complete());
      }).pipe(splitLines()),
      write: (line) => void kilo.stdin?.write(`${line}\n`),
      end: () => kilo.stdin?.end(),
    };
    let started: number[] = [];
    const session = await foldAcpSession(
      io,
      { start: { type: 'new_task', prompt: 'Create hello.txt saying hello.' }, autoApprove: false, cwd },
      {
        permissions: ['approve'],
        followUps: ['Now say bye.'],
        onDone: () => {
          // kilo itself and whatever it started (the binary has had one child at most, not always alive by now).
          started = [kilo.pid as number, ...descendants(kilo.pid as number)];
          io.end();
        },
      },
    );

    expect(session.error).toBeUndefined();
    expect(session.rejected).toEqual([]);
    expect(session.states).toEqual(['idle', 'creating', 'streaming', 'waiting_approval', 'streaming', 'completed', 'streaming', 'completed']);
    expect(session.state.lastText).toBe('Bye now.');
    expect(existsSync(join(cwd, 'hello.txt')) && readFileSync(join(cwd, 'hello.txt'), 'utf8')).toBe('hello from kilo\n');
    expect(await exited).toBe(0);
    expect(started.filter(alive)).toEqual([]);
  }, 60_000);
});
