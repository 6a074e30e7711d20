import { spawn, type ChildProcess, type ChildProcessWithoutNullStreams } from 'node:child_process';
import type { Socket } from 'node:net';
import { constants } from 'node:os';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Observable, from, switchMap } from 'rxjs';
import type { CliProcessIo } from './cli-adapter.js';
import { type CliContainment, cliContainment, containedCommand } from './cli-containment.js';
import { executablePath } from './executable-path.js';
import { CliProcessOutput, type CliProcessSettings, cliProcessSettings } from './cli-process-output.js';
import { CliProcessError, type CliProcessEvent, type CliProcessOptions } from './spawn-cli-process.js';

export { CliProcessError, DEFAULT_STDERR_TAIL_BYTES, type CliProcessEvent, type CliProcessOptions } from './spawn-cli-process.js';

/** What a spawn error code means, for the message. */
const SPAWN_ERRNO: Readonly<Record<string, string>> = {
  ENOENT: 'no such file, or not found on PATH (or the working directory does not exist)',
  EACCES: 'permission denied (not executable)',
  ENOTDIR: 'a part of the path is not a directory',
};

/** The exit code of a process ended by `signal`: 128 + its number. */
export const exitCodeOfSignal = (signal: string): number => 128 + ((constants.signals as Readonly<Record<string, number>>)[signal] ?? 0);

/**
 * What a watchdog runs: it waits on its stdin, a pipe only this server process holds open, so it
 * reads end-of-file once this process is gone, however it ended (SIGKILL included, where no exit
 * hook runs); then it ends the group as `cliProcess` would: SIGTERM, then SIGKILL after the grace.
 */
const WATCHDOG_SCRIPT = 'read _; kill -TERM -"$1" 2>/dev/null; sleep "$2"; kill -KILL -"$1" 2>/dev/null';

/**
 * A watchdog of the process group `pid` (`sh`, outside the group), so that a CLI does not work on
 * for nobody after this server process was killed; `undefined` where it cannot start (it is a
 * safety net: the group itself runs regardless). Killed here once the group is known to be gone.
 */
function groupWatchdog(pid: number, killGraceMs: number): ChildProcess | undefined {
  try {
    const watchdog = spawn('sh', ['-c', WATCHDOG_SCRIPT, 'runestream-cli-watchdog', String(pid), String(killGraceMs / 1000)], {
      cwd: '/',
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    watchdog.on('error', () => {}); // no sh: the exit hook still ends the group on a clean exit
    watchdog.stdin!.on('error', () => {});
    // It never keeps this process alive.
    watchdog.unref();
    (watchdog.stdin as Socket).unref();
    return watchdog;
  } catch {
    return undefined;
  }
}

/** Process groups started here and not yet known to be gone, with their watchdogs: killed when the server process exits. */
const liveGroups = new Map<number, ChildProcess | undefined>();
let exitHookInstalled = false;
const killLiveGroupsOnExit = (): void => {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const [pid, watchdog] of liveGroups) {
      signalGroup(pid, 'SIGKILL');
      watchdog?.kill('SIGKILL');
    }
  });
};

/** A group started here: remembered, with a watchdog, until it is known to be gone. */
const watchGroup = (pid: number, killGraceMs: number): void => {
  if (!liveGroups.has(pid)) liveGroups.set(pid, groupWatchdog(pid, killGraceMs));
  killLiveGroupsOnExit();
};

/** A group known to be gone: forgotten, its watchdog ended (the pid may be reused). */
const forgetGroup = (pid: number): void => {
  liveGroups.get(pid)?.kill('SIGKILL');
  liveGroups.delete(pid);
};

/** The `spawn_failed` error of a command that could not start, by its errno code. */
const spawnFailed = (command: string, cwd: string, code: string | undefined, message = code ?? 'unknown error'): CliProcessError => {
  const reason = code !== undefined && SPAWN_ERRNO[code] !== undefined ? `${code}: ${SPAWN_ERRNO[code]}` : message;
  return new CliProcessError('spawn_failed', `could not start "${command}" in ${cwd}: ${reason}`);
};

/** Signals a process group; false when it has no process left (or is not ours to signal). */
function signalGroup(pid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * A child process as an Observable: cold, so subscribing spawns it and unsubscribing ends it.
 *
 * 1. It runs `command` with `args` in `cwd` in its own process group, with only PATH, HOME, USER,
 *    SHELL, TERM and LOGNAME of the server's environment (the MCP SDK's `getDefaultEnvironment`)
 *    plus `env`: the server's secrets stay with the server. On Linux, where `unshare` can (see
 *    `cliContainment`, checked once), in a PID namespace of its own too: `unshare` leads the group
 *    and holds the namespace, whose init (`sh`) runs the command, so whatever it starts, in any
 *    group or session, ends with it (SIGKILL) once the command exits or is ended; elsewhere the
 *    process group alone, which a process of another group or session leaves.
 * 2. Once it runs: `spawned` with its stdio. Its stdout is `io.lines$` (split by `splitLines`,
 *    bounded); `io.write` and `io.end` are its stdin, and a write after stdin closed (the process
 *    exited, EPIPE) is dropped: it never throws.
 * 3. It exits: `exit` with its code (a signal as 128 + its number; in a PID namespace, where its
 *    init reports the code only, without `signal`) once stdout has ended, then completes. A process that cannot start errors with {@link CliProcessError} `spawn_failed`,
 *    naming the command and the reason (ENOENT, EACCES).
 * 4. No stdout line for `idleTimeoutMs` (on `scheduler`): the process is ended and the Observable
 *    errors with `idle_timeout`.
 * 5. Ended (unsubscribed, idle): SIGTERM to its group, so its children end with it, then SIGKILL
 *    after `killGraceMs` on `scheduler` to whatever of the group is left (`unshare` among them: its
 *    namespace goes with it). Groups still alive when the server process exits get SIGKILL then; a
 *    server process killed outright (SIGKILL, where no exit hook runs) leaves a watchdog (`sh`,
 *    one per live group) that does the same: a CLI never works on for a server that is gone.
 */
export function cliProcess(options: CliProcessOptions): Observable<CliProcessEvent> {
  const settings = cliProcessSettings('cliProcess', options);
  return from(cliContainment()).pipe(switchMap((containment) => containedCliProcess(settings, containment)));
}

/** `cliProcess` contained as `containment` says. */
export function containedCliProcess(settings: CliProcessSettings, containment: CliContainment): Observable<CliProcessEvent> {
  const { command, args, cwd, env, stdin, endStdin, scheduler, killGraceMs } = settings;
  return new Observable<CliProcessEvent>((subscriber) => {
    const childEnv = { ...getDefaultEnvironment(), ...env };
    let file = command;
    if (containment.kind === 'pid_namespace') {
      // Looked up here as `spawn` would, so a missing command is `spawn_failed`, not the wrapper's exit 127.
      const found = executablePath(command, cwd, childEnv.PATH ?? process.env.PATH);
      if (!('path' in found)) {
        subscriber.error(spawnFailed(command, cwd, found.code));
        return;
      }
      file = found.path;
    }
    const contained = containedCommand(containment, file, args);
    let child: ChildProcessWithoutNullStreams;
    try {
      child = spawn(contained.file, [...contained.args], { cwd, env: childEnv, detached: true, stdio: 'pipe' });
    } catch (error) {
      // A bad argument (a NUL in it) throws at once rather than emitting `error`.
      subscriber.error(new CliProcessError('spawn_failed', `could not start "${command}": ${(error as Error).message}`));
      return;
    }
    const output = new CliProcessOutput(subscriber, settings);
    let running = false;
    let exited = false;
    let stdinOpen = true;

    const closeStdin = (): void => {
      if (!stdinOpen) return;
      stdinOpen = false;
      child.stdin.end();
    };
    const io: CliProcessIo = {
      lines$: output.lines$,
      write: (line) => {
        if (stdinOpen && child.stdin.writable) child.stdin.write(`${line}\n`);
      },
      end: closeStdin,
    };

    child.stdin.on('error', () => {
      stdinOpen = false; // EPIPE: the process stopped reading; later writes are dropped
    });
    child.stderr.on('data', (chunk: Buffer) => output.stderr(chunk));
    output.readStdout(
      new Observable<Buffer>((chunks) => {
        child.stdout.on('data', (chunk: Buffer) => chunks.next(chunk));
        child.stdout.on('end', () => chunks.complete());
      }),
    );
    child.on('spawn', () => {
      running = true;
      const { pid } = child;
      watchGroup(pid!, killGraceMs);
      output.spawned(pid!, io);
      if (stdin !== undefined && stdin.length > 0) child.stdin.write(stdin);
      if (endStdin) closeStdin();
    });
    child.on('error', (error: NodeJS.ErrnoException) => {
      if (running) return; // a failed kill or write after it started: its exit says the rest
      subscriber.error(spawnFailed(command, cwd, error.code, error.message));
    });
    child.on('exit', () => {
      exited = true;
      stdinOpen = false;
      // Its group is gone with it: no SIGKILL will be needed (a group member left behind keeps it).
      if (!signalGroup(child.pid!, 0)) forgetGroup(child.pid!);
    });
    // 'close': the process exited and its stdio ended, so the adapter has had every line.
    child.on('close', (code: number | null, signal: NodeJS.Signals | null) => {
      output.exited(code ?? exitCodeOfSignal(signal ?? ''), signal ?? undefined);
    });

    return () => {
      output.close();
      const { pid } = child;
      if (pid === undefined) return; // never started
      if (exited && !liveGroups.has(pid)) return;
      // SIGTERM to the group; a process that has not yet made its group yet gets it alone.
      if (!signalGroup(pid, 'SIGTERM') && !exited) child.kill('SIGTERM');
      watchGroup(pid, killGraceMs);
      const grace = scheduler.schedule(() => {
        signalGroup(pid, 'SIGKILL');
        if (!exited) child.kill('SIGKILL');
        forgetGroup(pid);
      }, killGraceMs);
      // The whole group gone before the grace ran out: nothing to kill (and its pid may be reused).
      child.once('exit', () => {
        if (!signalGroup(pid, 0)) {
          grace.unsubscribe();
          forgetGroup(pid);
        }
      });
    };
  });
}
