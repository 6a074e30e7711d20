import {
  NEVER,
  Subject,
  asyncScheduler,
  distinctUntilChanged,
  isObservable,
  startWith,
  switchMap,
  type Observable,
  type SchedulerLike,
  type Subscriber,
  type Subscription,
} from 'rxjs';
import { splitLines } from '../../streams/split-lines.js';
import { idleTimeout } from '../llm/idle-timeout.js';
import { DEFAULT_CLI_IDLE_TIMEOUT_MS, DEFAULT_CLI_KILL_GRACE_MS, type CliProcessIo } from './cli-adapter.js';
import { CliProcessError, DEFAULT_STDERR_TAIL_BYTES, type CliProcessEvent, type CliProcessOptions } from './spawn-cli-process.js';

/** {@link CliProcessOptions} checked, with their defaults. */
export interface CliProcessSettings {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  readonly stdin: string | undefined;
  readonly endStdin: boolean;
  readonly scheduler: SchedulerLike;
  readonly maxLineLength: number | undefined;
  readonly idleTimeoutMs: number;
  /** Whether the idle clock runs (see {@link CliProcessOptions.working$}); undefined: always. */
  readonly working$: Observable<boolean> | undefined;
  readonly killGraceMs: number;
  readonly stderrTailBytes: number;
}

const positive = (caller: string, name: string, value: number | undefined, fallback: number): number => {
  if (value === undefined) return fallback;
  if (!(value > 0) || !Number.isFinite(value)) throw new TypeError(`${caller}: "${name}" must be a positive number, got ${String(value)}`);
  return value;
};

/** Checks `options` for `caller` (`cliProcess`, `inProcessCli`), naming a bad one in a TypeError, and fills in the defaults. */
export function cliProcessSettings(caller: string, options: CliProcessOptions): CliProcessSettings {
  const { command, args = [], cwd, env = {}, stdin, endStdin = false, scheduler = asyncScheduler, maxLineLength } = options;
  if (typeof command !== 'string' || command.length === 0) throw new TypeError(`${caller}: "command" must be a non-empty string`);
  if (typeof cwd !== 'string' || cwd.length === 0) throw new TypeError(`${caller}: "cwd" must be a non-empty string`);
  if (options.working$ !== undefined && !isObservable(options.working$)) throw new TypeError(`${caller}: "working$" must be an Observable of booleans`);
  return {
    command,
    args,
    cwd,
    env,
    stdin,
    endStdin,
    scheduler,
    maxLineLength,
    idleTimeoutMs: positive(caller, 'idleTimeoutMs', options.idleTimeoutMs, DEFAULT_CLI_IDLE_TIMEOUT_MS),
    working$: options.working$,
    killGraceMs: positive(caller, 'killGraceMs', options.killGraceMs, DEFAULT_CLI_KILL_GRACE_MS),
    stderrTailBytes: positive(caller, 'stderrTailBytes', options.stderrTailBytes, DEFAULT_STDERR_TAIL_BYTES),
  };
}

/** The last `limit` bytes of a byte stream. */
class Tail {
  #chunks: Buffer[] = [];
  #length = 0;
  constructor(private readonly limit: number) {}
  push(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#length += chunk.length;
    while (this.#length - this.#chunks[0]!.length >= this.limit) this.#length -= this.#chunks.shift()!.length;
  }
  text(): string {
    const all = Buffer.concat(this.#chunks);
    return all.subarray(Math.max(0, all.length - this.limit)).toString('utf8');
  }
}

/**
 * What a CLI process shows its subscriber, whatever runs it (an OS process in `cliProcess`, a
 * program in this process in `inProcessCli`), so both behave alike: `spawned` with its io, its
 * stdout as bounded lines that each restart the idle clock, an `idle_timeout` error when the clock
 * runs out, and `exit` with the end of stderr once stdout has ended.
 */
export class CliProcessOutput {
  readonly #lines = new Subject<string>();
  /** Its stdout lines, for the io an adapter reads (hot from `spawned` on). */
  readonly lines$: Observable<string> = this.#lines.asObservable();
  readonly #stderr: Tail;
  /** A stdout line (or the start): the idle clock counts from the last one. */
  readonly #activity = new Subject<void>();
  #idle: Subscription | undefined;
  #stdout: Subscription | undefined;

  constructor(
    private readonly subscriber: Subscriber<CliProcessEvent>,
    private readonly settings: CliProcessSettings,
  ) {
    this.#stderr = new Tail(settings.stderrTailBytes);
  }

  /** Its stdout as chunks: split into lines (see `splitLines`), each restarting the idle clock; `lines$` completes with it. */
  readStdout(chunks$: Observable<Uint8Array | string>): void {
    const { maxLineLength } = this.settings;
    this.#stdout = chunks$.pipe(splitLines(maxLineLength === undefined ? {} : { maxLineLength })).subscribe({
      next: (line) => {
        this.#activity.next();
        this.#lines.next(line);
      },
      complete: () => this.#lines.complete(),
    });
  }

  /** A chunk of its stderr, kept for error text. */
  stderr(chunk: Buffer): void {
    this.#stderr.push(chunk);
  }

  /** It runs: the idle clock starts (while it is working), and `spawned` tells its pid and io. */
  spawned(pid: number, io: CliProcessIo): void {
    const { scheduler, idleTimeoutMs, command, working$ } = this.settings;
    // One timer per quiet period, not one per line (a CLI may print thousands, and each re-armed
    // timer would stay queued on a virtual clock until its time).
    const idle$ = this.#activity.pipe(
      idleTimeout(
        idleTimeoutMs,
        scheduler,
        () => new CliProcessError('idle_timeout', `"${command}" printed no line for ${idleTimeoutMs} ms, so it was ended`, this.#stderr.text()),
      ),
    );
    // A process waiting for a person has no clock: its quiet is not a hang.
    const clock$ =
      working$ === undefined
        ? idle$
        : working$.pipe(
            startWith(true),
            distinctUntilChanged(),
            switchMap((working) => (working ? idle$ : NEVER)),
          );
    this.#idle = clock$.subscribe({ error: (error: unknown) => this.subscriber.error(error) });
    this.subscriber.next({ type: 'spawned', pid, io });
  }

  /** It exited and its stdout ended (the adapter has had every line): `exit`, then complete. */
  exited(code: number, signal?: string): void {
    this.#idle?.unsubscribe();
    this.subscriber.next({ type: 'exit', code, ...(signal === undefined ? {} : { signal }), stderr: this.#stderr.text() });
    this.subscriber.complete();
  }

  /** It is ended from here (unsubscribed, idle): no more lines. */
  close(): void {
    this.#idle?.unsubscribe();
    this.#stdout?.unsubscribe();
    this.#lines.complete();
  }
}
