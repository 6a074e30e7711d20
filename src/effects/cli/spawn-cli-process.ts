import type { Observable, SchedulerLike } from 'rxjs';
import type { CliProcessIo, CliRun } from './cli-adapter.js';

/** Default of {@link CliProcessOptions.stderrTailBytes}: the last 4 KiB of stderr are kept for error text. */
export const DEFAULT_STDERR_TAIL_BYTES = 4096;

/** Options of `cliProcess` (and of every {@link SpawnCliProcess}). */
export interface CliProcessOptions {
  /** The executable, found on PATH or given as a path. */
  readonly command: string;
  readonly args?: readonly string[];
  readonly cwd: string;
  /** Added to a safe few of the server's variables (PATH, HOME, USER, SHELL, TERM, LOGNAME): nothing else is inherited. */
  readonly env?: Readonly<Record<string, string>>;
  /** Written to stdin as it is once the process runs. Default nothing. */
  readonly stdin?: string;
  /** Whether stdin is closed after `stdin` is written. Default false. */
  readonly endStdin?: boolean;
  /** No stdout line for this long: the process is ended and the Observable errors (`idle_timeout:`). Default 600,000. */
  readonly idleTimeoutMs?: number;
  /**
   * Whether the process is expected to print now: the idle clock runs only while the latest value
   * is true (true until the first), and counts afresh from the next true. A session's run passes
   * false while its session waits for a person (an approval, an answer, the next message), since
   * that is not silence. Default: always true.
   */
  readonly working$?: Observable<boolean>;
  /** How long the ended process group gets between SIGTERM and SIGKILL. Default 5,000. */
  readonly killGraceMs?: number;
  /** The scheduler of the idle timeout and the kill grace. Default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
  /** The longest stdout line kept whole (see `splitLines`). */
  readonly maxLineLength?: number;
  /** How much of the end of stderr is kept for error text. Default {@link DEFAULT_STDERR_TAIL_BYTES}. */
  readonly stderrTailBytes?: number;
}

/**
 * What a process does: it `spawned` (its pid, and its stdio for an adapter: subscribe `io.lines$`
 * in the same tick, it is hot from here), then it exited once its stdout ended.
 */
export type CliProcessEvent =
  | { readonly type: 'spawned'; readonly pid: number; readonly io: CliProcessIo }
  | {
      readonly type: 'exit';
      /** The exit code; a process ended by a signal has 128 + the signal's number (SIGTERM 143, SIGKILL 137), as shells report it. */
      readonly code: number;
      /** The signal that ended it, where the OS tells it (not for a CLI in a PID namespace: its init reports the code only). */
      readonly signal?: string;
      /** The end of its stderr (see {@link CliProcessOptions.stderrTailBytes}). */
      readonly stderr: string;
    };

/** Why a process failed: the message starts with its code (`spawn_failed: ...`, `idle_timeout: ...`). */
export class CliProcessError extends Error {
  constructor(
    readonly code: 'spawn_failed' | 'idle_timeout',
    /** The message after its code. */
    readonly detail: string,
    /** The end of the process's stderr, when it ran. */
    readonly stderr = '',
  ) {
    super(`${code}: ${detail}`);
    this.name = 'CliProcessError';
  }
}

/** Who a session's CLI process is for: what a {@link SpawnCliProcess} is told besides the process's options. */
export interface CliSpawnContext {
  /** The session's stream. */
  readonly stream: string;
  /** The configured CLI's name (the key of `clis`). */
  readonly cli: string;
  /** The run the process is for (why it starts, the CLI's session id, auto-approve). */
  readonly run: CliRun;
}

/**
 * Makes the process of one run of an agent CLI session: what `cliProcess` does with an OS process
 * (the default of `agentCliSessions`' `spawnProcess`), and `inProcessCli` with a program in this
 * process. Cold: subscribing starts it and unsubscribing ends it. It emits `spawned` with the io the
 * adapter reads and writes, then `exit` once stdout has ended, or errors with a
 * {@link CliProcessError} (`spawn_failed`, `idle_timeout` after `options.idleTimeoutMs` on
 * `options.scheduler` without a stdout line while `options.working$` says it works); any other
 * error is the run's `drive_failed`. A function that wraps `cliProcess` or `inProcessCli` passes
 * the options on as they are.
 */
export type SpawnCliProcess = (options: CliProcessOptions, context: CliSpawnContext) => Observable<CliProcessEvent>;
