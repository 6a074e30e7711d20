import { NEVER, Observable, VirtualTimeScheduler, firstValueFrom, lastValueFrom, of, throwError, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { CliProcessError, inProcessCli, type CliProcessEvent, type CliProcessOptions, type CliProgram } from '../../../src/agents.js';
import { cliProcessContract, stepsProgram, transcript } from './cli-process-contract.js';
import { event, type FakeStep } from './support.js';

/** The fake CLI's steps, run in this process. */
const inProcess = (steps: readonly FakeStep[], options: Partial<CliProcessOptions> = {}) => inProcessCli({ command: 'fake', cwd: '.', ...options }, stepsProgram(steps));

const failure = (process$: Observable<CliProcessEvent>): Promise<unknown> => firstValueFrom(process$).catch((error: unknown) => error);

describe('inProcessCli', () => {
  cliProcessContract('inProcessCli', inProcess, (options) => inProcessCli(options, () => of()));

  it('tells the pid it is given, and a program that completes exits 0', async () => {
    const events = await lastValueFrom(inProcessCli({ command: 'fake', cwd: '.', pid: 7 }, () => of({ type: 'stdout', text: 'hi\n' })).pipe(toArray()));
    expect(events.map((e) => (e.type === 'spawned' ? `spawned:${e.pid}` : `exit:${e.code}`))).toEqual(['spawned:7', 'exit:0']);
  });

  it('a program that throws or errors while it starts could not start: spawn_failed naming the command', async () => {
    const throwing: CliProgram = () => {
      throw new Error('no such fake');
    };
    for (const program of [throwing, () => throwError(() => new Error('no such fake'))]) {
      const error = await failure(inProcessCli({ command: 'fake-x', cwd: '.' }, program));
      expect(error).toBeInstanceOf(CliProcessError);
      expect((error as Error).message).toBe('spawn_failed: could not start "fake-x": no such fake');
    }
    const own = new CliProcessError('spawn_failed', 'ENOENT, as a real one would say');
    expect(await failure(inProcessCli({ command: 'fake-x', cwd: '.' }, () => throwError(() => own)))).toBe(own);
  });

  it('an error after it started is the Observable error as it is (the run makes it drive_failed)', async () => {
    const bug = new Error('a bug in the program');
    const program: CliProgram = ({ stdin$ }) => new Observable((subscriber) => stdin$.subscribe(() => subscriber.error(bug)));
    const error = new Promise((resolve) =>
      inProcessCli({ command: 'fake', cwd: '.' }, program).subscribe({ next: (e) => e.type === 'spawned' && e.io.write('go'), error: resolve }),
    );
    expect(await error).toBe(bug);
  });

  it('unsubscribed, it unsubscribes the program at once: killed, with no exit told', () => {
    let killed = 0;
    const events: string[] = [];
    const program: CliProgram = () => new Observable(() => () => killed++);
    const subscription = inProcessCli({ command: 'fake', cwd: '.' }, program).subscribe((e) => events.push(e.type));
    expect([events, killed]).toEqual([['spawned'], 0]);
    subscription.unsubscribe();
    expect([events, killed]).toEqual([['spawned'], 1]);
  });

  it('after an idle timeout the program is killed and nothing more of it is read', async () => {
    const scheduler = new VirtualTimeScheduler();
    let killed = false;
    const program: CliProgram = () => new Observable(() => () => (killed = true));
    const lines = transcript(inProcessCli({ command: 'fake', cwd: '.', scheduler, idleTimeoutMs: 1000 }, program));
    const done = lastValueFrom(lines.pipe(toArray())).catch((error: unknown) => error);
    scheduler.flush();
    expect(((await done) as Error).message).toBe('idle_timeout: "fake" printed no line for 1000 ms, so it was ended');
    expect(killed).toBe(true);
  });

  it('each line restarts the idle clock: the timeout comes idleTimeoutMs after the last line (virtual time)', async () => {
    const scheduler = new VirtualTimeScheduler();
    const steps = [event({ type: 'a' }), { sleep: 50_000 }, event({ type: 'b' }), { sleep: 50_000 }, event({ type: 'c' }), { hang: true }];
    const seen: string[] = [];
    transcript(inProcess(steps, { scheduler, idleTimeoutMs: 60_000 })).subscribe({
      next: (line) => seen.push(`${line}@${scheduler.now()}`),
      error: (error: Error) => seen.push(`${error.message}@${scheduler.now()}`),
    });
    scheduler.flush();
    expect(seen).toEqual([
      'line:{"type":"a"}@0',
      'line:{"type":"b"}@50000',
      'line:{"type":"c"}@100000',
      'idle_timeout: "fake" printed no line for 60000 ms, so it was ended@160000',
    ]);
  });

  it('refuses a bad pid or program', () => {
    expect(() => inProcessCli({ command: 'fake', cwd: '.', pid: -1 }, () => NEVER)).toThrow('inProcessCli: "pid" must be a non-negative integer, got -1');
    expect(() => inProcessCli({ command: 'fake', cwd: '.' }, undefined as unknown as CliProgram)).toThrow('inProcessCli: "program" must be a function');
  });
});
