import { Observable, Subject, type Subscription } from 'rxjs';
import { errorText } from '../../reducers/error-text.js';
import type { CliProcessIo } from './cli-adapter.js';
import { CliProcessOutput, cliProcessSettings } from './cli-process-output.js';
import { CliProcessError, type CliProcessEvent, type CliProcessOptions } from './spawn-cli-process.js';

/** What an in-process CLI program prints, and how it ends. */
export type CliProgramOutput =
  /** Text on its stdout, any part of a line or several (split into lines as a process's are). */
  | { readonly type: 'stdout'; readonly text: string }
  /** Text on its stderr: its end is the `exit` event's `stderr` and an error's text. */
  | { readonly type: 'stderr'; readonly text: string }
  /** It exits with `code`: nothing after this is read. */
  | { readonly type: 'exit'; readonly code: number };

/** What a program is started with. */
export interface CliProgramStart {
  /** The options it was started with: its `command`, `args`, `cwd`, `env`, and the `scheduler` it should keep time on. */
  readonly options: CliProcessOptions;
  /**
   * The lines written to its stdin (the options' `stdin` text first, then each `io.write`),
   * completing when stdin is closed. Hot: subscribe to it when the program starts.
   */
  readonly stdin$: Observable<string>;
}

/** A CLI as a program in this process: subscribed when the process starts, unsubscribed when it is killed. */
export type CliProgram = (start: CliProgramStart) => Observable<CliProgramOutput>;

/** Options of {@link inProcessCli}. */
export interface InProcessCliOptions extends CliProcessOptions {
  /** The pid its `spawned` event tells. Default 0 (no OS process). */
  readonly pid?: number;
}

/**
 * A CLI process run as a program in this process: the events `cliProcess` gives for an OS process
 * (a `SpawnCliProcess`, for `agentCliSessions`' `spawnProcess`), with no OS process. For tests and
 * the simulation, where a CLI's behaviour and timing must come from the test.
 *
 * 1. Subscribed, it starts `program` (which subscribes to `stdin$`), then emits `spawned` with the
 *    io an adapter reads and writes: `io.lines$` is the program's stdout split into lines (bounded
 *    by `maxLineLength`), `io.write(line)` reaches `stdin$`, `io.end()` completes it; a write after
 *    stdin closed is dropped. Then the options' `stdin` is written, and stdin is closed if
 *    `endStdin`. What the program prints while it starts is held until `spawned` was told.
 * 2. A program that throws, or errors, before `spawned` could not start: the Observable errors
 *    with `CliProcessError` `spawn_failed` (the program's own `CliProcessError` as it is).
 * 3. The program's `exit` (or its completion: exit 0) ends stdout, then `exit` tells the code and
 *    the end of its stderr, and the Observable completes. An error after `spawned` is the
 *    Observable's error (the run's `drive_failed`).
 * 4. No stdout line for `idleTimeoutMs` on `scheduler` while `working$` says it works: the program
 *    is unsubscribed and the Observable errors with `idle_timeout`, as `cliProcess` does (the same
 *    code keeps both clocks).
 * 5. Unsubscribed: the program is unsubscribed at once (no signal, no grace: `killGraceMs` is not used).
 *
 * ## Example
 * ```ts
 * import { inProcessCli, type CliProgramOutput } from 'runestream/agents';
 * import { from } from 'rxjs';
 * // A "CLI" that prints two lines (the last without a line break) and exits 3, saying why on stderr.
 * const outputs: CliProgramOutput[] = [{ type: 'stdout', text: 'a\nb' }, { type: 'stderr', text: 'no model' }, { type: 'exit', code: 3 }];
 * inProcessCli({ command: 'demo', cwd: '.' }, () => from(outputs)).subscribe((event) => {
 *   if (event.type === 'spawned') event.io.lines$.subscribe((line) => console.log(line));
 *   else console.log(event.type, event.code, event.stderr);
 * });
 * // Logs: a
 * //       b
 * //       exit 3 no model
 * ```
 */
export function inProcessCli(options: InProcessCliOptions, program: CliProgram): Observable<CliProcessEvent> {
  const settings = cliProcessSettings('inProcessCli', options);
  const { pid = 0 } = options;
  if (!Number.isSafeInteger(pid) || pid < 0) throw new TypeError(`inProcessCli: "pid" must be a non-negative integer, got ${String(pid)}`);
  if (typeof program !== 'function') throw new TypeError('inProcessCli: "program" must be a function (start) => Observable of its outputs');
  const { command, stdin, endStdin } = settings;
  return new Observable<CliProcessEvent>((subscriber) => {
    const output = new CliProcessOutput(subscriber, settings);
    const stdout = new Subject<string>();
    output.readStdout(stdout);
    const stdinLines = new Subject<string>();
    let stdinOpen = true;
    const closeStdin = (): void => {
      if (!stdinOpen) return;
      stdinOpen = false;
      stdinLines.complete();
    };
    const io: CliProcessIo = {
      lines$: output.lines$,
      write: (line) => {
        if (stdinOpen) stdinLines.next(line);
      },
      end: closeStdin,
    };

    /** Whether `spawned` is being or was told: from here an error is the program's, not a failed start. */
    let started = false;
    /** Whether what it prints goes out (else it is held: `spawned` has not been told yet). */
    let printing = false;
    let ended = false;
    const held: CliProgramOutput[] = [];
    const couldNotStart = (error: unknown): CliProcessError =>
      error instanceof CliProcessError ? error : new CliProcessError('spawn_failed', `could not start "${command}": ${errorText(error)}`);
    const print = (out: CliProgramOutput): void => {
      if (ended) return;
      if (!printing) {
        held.push(out);
        return;
      }
      if (out.type === 'stdout') stdout.next(out.text);
      else if (out.type === 'stderr') output.stderr(Buffer.from(out.text));
      else {
        ended = true;
        closeStdin();
        stdout.complete(); // every line is read before the exit is told
        output.exited(out.code);
      }
    };

    let running: Subscription | undefined;
    try {
      running = program({ options, stdin$: stdinLines.asObservable() }).subscribe({
        next: print,
        error: (error: unknown) => subscriber.error(started ? error : couldNotStart(error)),
        complete: () => print({ type: 'exit', code: 0 }),
      });
    } catch (error) {
      subscriber.error(couldNotStart(error));
      return;
    }
    if (subscriber.closed) return () => running?.unsubscribe();
    started = true;
    output.spawned(pid, io);
    if (stdin !== undefined) for (const line of stdin.split('\n')) if (line.length > 0) io.write(line);
    if (endStdin) closeStdin();
    printing = true;
    for (const out of held.splice(0)) print(out);

    return () => {
      ended = true;
      running?.unsubscribe();
      output.close();
    };
  });
}
