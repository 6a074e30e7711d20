import {
  BehaviorSubject,
  Observable,
  ReplaySubject,
  VirtualTimeScheduler,
  concat,
  defer,
  lastValueFrom,
  map,
  mergeMap,
  of,
  skip,
  take,
  timer,
  toArray,
  type Subscription,
} from 'rxjs';
import { afterEach, expect, it, vi } from 'vitest';
import { CliProcessError, type CliProcessEvent, type CliProcessOptions, type CliProgram, type CliProgramOutput } from '../../../src/agents.js';
import { event, type FakeStep } from './support.js';

/** A way to run the fake CLI's steps as a process: `cliProcess` on the real fake, or `inProcessCli` on {@link stepsProgram}. */
export type RunSteps = (steps: readonly FakeStep[], options?: Partial<CliProcessOptions>) => Observable<CliProcessEvent>;

/**
 * The fake CLI's steps as an in-process program, for the steps a program can run: `json`,
 * `line`, `raw`, `stderr`, `sleep` (on the options' scheduler), `hang`, `exit` and `echo`.
 */
export const stepsProgram =
  (steps: readonly FakeStep[]): CliProgram =>
  ({ options, stdin$ }) =>
    new Observable<CliProgramOutput>((subscriber) => {
      // stdin$ is hot: heard from the start, kept for the `echo` steps.
      const stdin = new ReplaySubject<string>();
      const heard = stdin$.subscribe(stdin);
      let read = 0;
      const out = (type: 'stdout' | 'stderr', text: string) => of<CliProgramOutput>({ type, text });
      const run = (step: FakeStep): Observable<CliProgramOutput> => {
        if ('json' in step) return out('stdout', `${JSON.stringify(step.json)}\n`);
        if ('line' in step) return out('stdout', `${String(step.line)}\n`);
        if ('raw' in step) return out('stdout', String(step.raw));
        if ('stderr' in step) return out('stderr', String(step.stderr));
        if ('sleep' in step) return timer(Number(step.sleep), options.scheduler).pipe(mergeMap(() => of<CliProgramOutput>()));
        if ('hang' in step) return new Observable<never>();
        if ('exit' in step) return of<CliProgramOutput>({ type: 'exit', code: Number(step.exit) });
        if ('echo' in step) {
          const from = read;
          read += Number(step.echo);
          return stdin.pipe(
            skip(from),
            take(Number(step.echo)),
            map((line): CliProgramOutput => ({ type: 'stdout', text: `${line}\n` })),
          );
        }
        throw new Error(`stepsProgram: the step ${JSON.stringify(step)} needs a real process`);
      };
      const subscription = concat(...steps.map((step) => defer(() => run(step)))).subscribe(subscriber);
      subscription.add(heard);
      return subscription;
    });

/** Everything a process does: its lines as `line:...`, then its exit. */
export const transcript = (process$: Observable<CliProcessEvent>): Observable<string> =>
  new Observable<string>((subscriber) =>
    process$.subscribe({
      next: (e) => {
        if (e.type === 'spawned') e.io.lines$.subscribe((line) => subscriber.next(`line:${line}`));
        else subscriber.next(`exit:${e.code}${e.signal === undefined ? '' : `:${e.signal}`}:${e.stderr}`);
      },
      error: (error: unknown) => subscriber.error(error),
      complete: () => subscriber.complete(),
    }),
  );

/**
 * What every CLI process gives an adapter, whatever runs it (`cliProcess`, `inProcessCli`): the
 * same steps give the same lines, exit and errors. `caller` names the function in its TypeErrors.
 */
export function cliProcessContract(caller: string, runSteps: RunSteps, make: (options: CliProcessOptions) => Observable<CliProcessEvent>): void {
  const subscriptions: Subscription[] = [];
  afterEach(() => {
    for (const subscription of subscriptions.splice(0)) subscription.unsubscribe();
  });

  it('gives stdout line by line (split writes joined, garbage kept as a line), then the exit code and the end of stderr, after the last line', async () => {
    const steps = [event({ type: 'a' }), { raw: '{"type":' }, { sleep: 20 }, { raw: '"b"}\nlast' }, { stderr: 'bad things' }, { exit: 3 }];
    expect(await lastValueFrom(transcript(runSteps(steps)).pipe(toArray()))).toEqual(['line:{"type":"a"}', 'line:{"type":"b"}', 'line:last', 'exit:3:bad things']);
  });

  it('writes the stdin option, then closes stdin with endStdin', async () => {
    const lines = await lastValueFrom(transcript(runSteps([{ echo: 2 }], { stdin: '{"type":"x"}\n', endStdin: true })).pipe(toArray()));
    expect(lines).toEqual(['line:{"type":"x"}', 'exit:0:']);
  });

  it('echoes stdin written through io.write; a write after the process exited is dropped, never thrown', async () => {
    const lines: string[] = [];
    const events: CliProcessEvent[] = [];
    const done = new Promise<void>((resolve) => {
      subscriptions.push(
        runSteps([{ echo: 1 }]).subscribe({
          next: (e) => {
            events.push(e);
            if (e.type !== 'spawned') return;
            e.io.lines$.subscribe((line) => lines.push(line));
            e.io.write('{"type":"hello"}');
          },
          complete: resolve,
        }),
      );
    });
    await done;
    expect(lines).toEqual(['{"type":"hello"}']);
    expect(events.at(-1)).toMatchObject({ type: 'exit', code: 0 });
    const io = (events[0] as Extract<CliProcessEvent, { type: 'spawned' }>).io;
    expect(() => {
      io.write('late');
      io.end();
    }).not.toThrow();
  });

  it('errors with idle_timeout when it prints no line for idleTimeoutMs (virtual time)', async () => {
    const scheduler = new VirtualTimeScheduler();
    const lines: string[] = [];
    const done = new Promise<unknown>((resolve) => {
      subscriptions.push(
        runSteps([event({ type: 'ready' }), { hang: true }], { scheduler, idleTimeoutMs: 60_000, killGraceMs: 1000 }).subscribe({
          next: (e) => e.type === 'spawned' && e.io.lines$.subscribe((line) => lines.push(line)),
          error: resolve,
          complete: () => resolve('complete'),
        }),
      );
    });
    await vi.waitFor(() => expect(lines).toEqual(['{"type":"ready"}']));
    scheduler.flush(); // a minute without a line
    const error = await done;
    expect(error).toBeInstanceOf(CliProcessError);
    expect((error as Error).message).toMatch(/^idle_timeout: ".*" printed no line for 60000 ms, so it was ended$/);
  });

  it('counts idle time only while working$ says it works, afresh from each true (virtual time)', async () => {
    const scheduler = new VirtualTimeScheduler();
    /** Moves the clock `ms` on, running the timers due by then. */
    const advance = (ms: number) => {
      scheduler.schedule(() => {}, ms); // virtual time moves only from action to action
      scheduler.maxFrames = scheduler.now() + ms;
      scheduler.flush();
    };
    const working$ = new BehaviorSubject(true);
    const lines: string[] = [];
    let outcome: unknown;
    subscriptions.push(
      runSteps([event({ type: 'ready' }), { hang: true }], { scheduler, idleTimeoutMs: 60_000, killGraceMs: 1000, working$ }).subscribe({
        next: (e) => e.type === 'spawned' && e.io.lines$.subscribe((line) => lines.push(line)),
        error: (error: unknown) => (outcome = error),
        complete: () => (outcome = 'complete'),
      }),
    );
    await vi.waitFor(() => expect(lines).toEqual(['{"type":"ready"}']));
    advance(50_000);
    working$.next(false); // waiting for a person: an hour of quiet is not a hang
    advance(3_600_000);
    expect(outcome).toBeUndefined();
    working$.next(true); // a whole idleTimeoutMs again
    advance(59_999);
    expect(outcome).toBeUndefined();
    advance(1);
    expect(outcome).toBeInstanceOf(CliProcessError);
    expect((outcome as Error).message).toMatch(/^idle_timeout: ".*" printed no line for 60000 ms, so it was ended$/);
    expect(() => make({ command: 'x', cwd: '.', working$: true as unknown as Observable<boolean> })).toThrow(`${caller}: "working$" must be an Observable of booleans`);
  });

  it('refuses bad options, naming them', () => {
    expect(() => make({ command: '', cwd: '.' })).toThrow(`${caller}: "command" must be a non-empty string`);
    expect(() => make({ command: 'x', cwd: '.', killGraceMs: 0 })).toThrow(`${caller}: "killGraceMs" must be a positive number, got 0`);
  });
}
