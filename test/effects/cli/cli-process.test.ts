import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Observable, Subscription, VirtualTimeScheduler, firstValueFrom, lastValueFrom, toArray } from 'rxjs';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { cliContainment } from '../../../src/effects/cli/cli-containment.js';
import { CliProcessError, cliProcess, containedCliProcess, type CliProcessEvent, type CliProcessOptions } from '../../../src/effects/cli/cli-process.js';
import { cliProcessSettings } from '../../../src/effects/cli/cli-process-output.js';
import { runAndKill } from '../../support/kill-worker.js';
import { killProcessesWith, processesWith, uniqueMarker } from '../../support/process-tree.js';
import { cliProcessContract, transcript } from './cli-process-contract.js';
import { FAKE_CLI, childPidOf, event, isRunning, type FakeStep } from './support.js';

/** The fake CLI as a process, running `steps`. */
const fake = (steps: readonly FakeStep[], options: Partial<CliProcessOptions> = {}) =>
  cliProcess({ command: process.execPath, args: [FAKE_CLI, JSON.stringify(steps)], cwd: process.cwd(), ...options });

const dir = mkdtempSync(join(tmpdir(), 'runestream-cli-process-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const subscriptions: Subscription[] = [];
const pids: number[] = [];
afterEach(() => {
  for (const subscription of subscriptions.splice(0)) subscription.unsubscribe();
  for (const pid of pids.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
});

/** Subscribes, and hands the first `spawned` event and each line to the test. */
function started(process$: Observable<CliProcessEvent>): { spawned: Promise<Extract<CliProcessEvent, { type: 'spawned' }>>; lines: string[]; done: Promise<unknown> } {
  const lines: string[] = [];
  let resolve!: (e: Extract<CliProcessEvent, { type: 'spawned' }>) => void;
  let settle!: (value: unknown) => void;
  const spawned = new Promise<Extract<CliProcessEvent, { type: 'spawned' }>>((r) => (resolve = r));
  const done = new Promise((r) => (settle = r));
  subscriptions.push(
    process$.subscribe({
      next: (e) => {
        if (e.type !== 'spawned') return settle(e);
        pids.push(e.pid);
        e.io.lines$.subscribe((line) => lines.push(line));
        resolve(e);
      },
      error: (error: unknown) => settle(error),
      complete: () => settle('complete'),
    }),
  );
  return { spawned, lines, done };
}

describe('cliProcess', () => {
  cliProcessContract('cliProcess', fake, cliProcess);

  it('reports an exit by a signal as 128 + its number (and the signal, where the OS tells it: not through a PID namespace)', async () => {
    const signal = (await cliContainment()).kind === 'pid_namespace' ? '' : ':SIGTERM';
    expect(await lastValueFrom(transcript(fake([{ kill: 'SIGTERM' }])))).toBe(`exit:143${signal}:`);
  });

  it('hands the CLI only the safe variables of the server and its own env', async () => {
    process.env.RUNESTREAM_TEST_SECRET = 'hunter2';
    try {
      const lines = await lastValueFrom(transcript(fake([{ env: 'RUNESTREAM_TEST_SECRET' }, { env: 'PATH' }, { env: 'GIVEN' }], { env: { GIVEN: 'yes' } })).pipe(toArray()));
      expect(lines.slice(0, 3).map((line) => JSON.parse(line.slice('line:'.length)).text)).toEqual(['(unset)', process.env.PATH, 'yes']);
    } finally {
      delete process.env.RUNESTREAM_TEST_SECRET;
    }
  });

  it('errors with spawn_failed naming the command when it cannot start (ENOENT)', async () => {
    const error = await firstValueFrom(cliProcess({ command: 'runestream-no-such-cli', cwd: process.cwd() })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CliProcessError);
    expect((error as CliProcessError).code).toBe('spawn_failed');
    expect((error as Error).message).toMatch(/^spawn_failed: could not start "runestream-no-such-cli" in .*: ENOENT/);
  });

  it('errors with spawn_failed when the command is not executable (EACCES), a path or a name on PATH alike', async () => {
    const script = join(dir, 'not-executable');
    writeFileSync(script, '#!/bin/sh\n', { mode: 0o644 });
    for (const options of [{ command: script }, { command: 'not-executable', env: { PATH: dir } }]) {
      const error = await firstValueFrom(cliProcess({ cwd: process.cwd(), ...options })).catch((e: unknown) => e);
      expect((error as Error).message).toMatch(/^spawn_failed: could not start "(.*\/)?not-executable" in .*: EACCES: permission denied/);
    }
  });

  it('where the PID namespace cannot be had, its process group: unsubscribed, it ends the process and its children', async () => {
    const settings = cliProcessSettings('cliProcess', { command: process.execPath, args: [FAKE_CLI, JSON.stringify([{ child: true }, { hang: true }])], cwd: process.cwd() });
    const { spawned, lines } = started(containedCliProcess(settings, { kind: 'process_group', reason: 'a test' }));
    const { pid } = await spawned;
    await vi.waitFor(() => expect(lines).toHaveLength(1), { timeout: 10_000 });
    const child = childPidOf(lines[0]);
    pids.push(child);
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]).toBe(process.execPath); // the CLI itself, no unshare
    subscriptions.pop()!.unsubscribe();
    await vi.waitFor(() => expect([isRunning(pid), isRunning(child)]).toEqual([false, false]));
  });

  it('ends the process with idle_timeout when it prints no line for idleTimeoutMs (virtual time)', async () => {
    const scheduler = new VirtualTimeScheduler();
    const { spawned, lines, done } = started(fake([event({ type: 'ready' }), { hang: true }], { scheduler, idleTimeoutMs: 60_000, killGraceMs: 1000 }));
    const { pid } = await spawned;
    await vi.waitFor(() => expect(lines).toEqual(['{"type":"ready"}']));
    scheduler.flush(); // a minute without a line: the timeout, SIGTERM, then the grace's SIGKILL
    const error = await done;
    expect(error).toBeInstanceOf(CliProcessError);
    expect((error as Error).message).toMatch(/^idle_timeout: ".*" printed no line for 60000 ms/);
    await vi.waitFor(() => expect(isRunning(pid)).toBe(false));
  });

  it('unsubscribed, it ends the process and its children (its process group)', async () => {
    const { spawned, lines } = started(fake([{ child: true }, { hang: true }]));
    const { pid } = await spawned;
    await vi.waitFor(() => expect(lines).toHaveLength(1), { timeout: 10_000 }); // the child has started
    const child = childPidOf(lines[0]);
    pids.push(child);
    expect(isRunning(child)).toBe(true);
    subscriptions.pop()!.unsubscribe();
    await vi.waitFor(() => expect([isRunning(pid), isRunning(child)]).toEqual([false, false]));
  });

  it('a server process killed outright (SIGKILL, no exit hook) does not leave its CLI working on: its watchdog ends the group', async () => {
    const worker = fileURLToPath(new URL('../../fixtures/cli-process-crash-worker.ts', import.meta.url));
    const { line, signal } = await runAndKill(worker, []);
    expect(signal).toBe('SIGKILL');
    const { cli, child } = JSON.parse(line) as { cli: number; child: number };
    pids.push(cli, child);
    await vi.waitFor(() => expect([isRunning(cli), isRunning(child)]).toEqual([false, false]), { timeout: 10_000 });
  });

  // kilo's bash tool starts commands in a session and group of their own: the process group alone misses them.
  describe('every process the CLI started ends with it, one in a session and process group of its own (setsid) too', () => {
    const markers: string[] = [];
    afterEach(() => {
      for (const marker of markers.splice(0)) killProcessesWith(marker);
    });
    const escaping = (): string => {
      const marker = uniqueMarker('escape');
      markers.push(marker);
      return marker;
    };

    it('unsubscribed', async () => {
      const marker = escaping();
      const { spawned, lines } = started(fake([{ escape: marker }, { hang: true }]));
      await spawned;
      await vi.waitFor(() => expect(lines).toEqual([`{"type":"say:text","text":"escaped:${marker}"}`]));
      expect(processesWith(marker)).toHaveLength(1);
      subscriptions.pop()!.unsubscribe();
      await vi.waitFor(() => expect(processesWith(marker)).toEqual([]), { timeout: 5_000 });
    });

    it('once the CLI exited', async () => {
      const marker = escaping();
      const { done } = started(fake([{ escape: marker }, { exit: 0 }]));
      expect(await done).toMatchObject({ type: 'exit', code: 0 });
      await vi.waitFor(() => expect(processesWith(marker)).toEqual([]), { timeout: 5_000 });
    });

    it('once the server process was killed outright (SIGKILL)', async () => {
      const marker = escaping();
      const worker = fileURLToPath(new URL('../../fixtures/cli-process-crash-worker.ts', import.meta.url));
      const { signal } = await runAndKill(worker, [marker]);
      expect(signal).toBe('SIGKILL');
      await vi.waitFor(() => expect(processesWith(marker)).toEqual([]), { timeout: 10_000 });
    });
  });

  it('gives a CLI that ignores SIGTERM a SIGKILL once killGraceMs has passed (virtual time)', async () => {
    const scheduler = new VirtualTimeScheduler();
    const noted = join(dir, 'sigterm.txt');
    const { spawned, lines } = started(fake([{ ignoreTerm: noted }, event({ type: 'ready' }), { hang: true }], { scheduler, killGraceMs: 5000 }));
    const { pid } = await spawned;
    await vi.waitFor(() => expect(lines).toHaveLength(1)); // its SIGTERM handler is in place
    subscriptions.pop()!.unsubscribe(); // SIGTERM: noted, ignored
    await vi.waitFor(() => expect(existsSync(noted) && readFileSync(noted, 'utf8')).toBe('SIGTERM\n'));
    expect(isRunning(pid)).toBe(true);
    scheduler.flush(); // the grace runs out: SIGKILL
    await vi.waitFor(() => expect(isRunning(pid)).toBe(false));
  });
});
