import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Observable, filter, firstValueFrom, map } from 'rxjs';
import type { AgentCliAdapter, AgentCliSpec, CliOutput, CliRun, CliUserEvent } from '../../../src/agents.js';
import type { AgentManagerSessionState, Engine } from '../../../src/index.js';

/** The fake agent CLI (see its header for the steps it runs). */
export const FAKE_CLI = fileURLToPath(new URL('../../fixtures/cli/fake-cli.mjs', import.meta.url));

/** One step of the fake CLI. */
export type FakeStep = Readonly<Record<string, unknown>>;

/** What the fake prints for a session event. */
export const event = (json: { type: string } & Record<string, unknown>): FakeStep => ({ json });

/** The lines an interactive test adapter writes to the fake (which echoes them) for each user event. */
export const answerOf = (user: CliUserEvent): { type: string; text: string } =>
  user.type === 'send_message' ? { type: 'say:text', text: `heard: ${user.text}` } : { type: 'say:text', text: user.type };

/**
 * A small adapter implementing the contract on the fake CLI: `launch` gives the fake the steps
 * `script(run)` returns; each stdout line that is a JSON object with a `type` is an event, any
 * other is ignored with its reason. Interactive, it writes `answerOf(user)` to stdin for each of
 * the user's events (a fake running `{echo: n}` prints it back). Every run it is told is kept in `runs`.
 */
export function fakeAdapter(options: { interactive: boolean; script: (run: CliRun) => readonly FakeStep[] }): AgentCliAdapter & { runs: CliRun[] } {
  const runs: CliRun[] = [];
  return {
    protocol: options.interactive ? 'acp' : 'ndjson',
    interactive: options.interactive,
    runs,
    launch: (run) => {
      runs.push(run);
      return { args: [FAKE_CLI, JSON.stringify(options.script(run))] };
    },
    drive: (io, _run, user$) =>
      new Observable<CliOutput>((subscriber) => {
        const subscription = io.lines$.pipe(map(outputOf)).subscribe(subscriber);
        if (options.interactive) subscription.add(user$.subscribe((user) => io.write(JSON.stringify(answerOf(user)))));
        return subscription;
      }),
  };
}

const outputOf = (line: string): CliOutput => {
  try {
    const value = JSON.parse(line) as unknown;
    if (typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string')
      return { event: value as CliOutput extends { event: infer E } ? E : never };
    return { ignored: `not an event: ${line}` };
  } catch {
    return { ignored: `not JSON: ${line}` };
  }
};

/** A CLI spec running the fake with `adapter`. */
export const fakeSpec = (adapter: AgentCliAdapter, extra: Partial<AgentCliSpec> = {}): AgentCliSpec => ({ adapter, command: process.execPath, cwd: process.cwd(), ...extra });

/** The session's first state that matches (its current one included). */
export const until = (engine: Engine, stream: string, match: (state: AgentManagerSessionState) => boolean): Promise<AgentManagerSessionState> =>
  firstValueFrom(engine.state$<AgentManagerSessionState>(stream).pipe(filter(match)));

/** Whether a process runs (a zombie, dead but not yet reaped by its parent, does not). */
export function isRunning(pid: number): boolean {
  const stat = `/proc/${pid}/stat`;
  if (existsSync('/proc/self/stat')) {
    try {
      // The state follows the command name in parentheses: "Z" is a zombie.
      const text = readFileSync(stat, 'utf8');
      return text.slice(text.lastIndexOf(')') + 2, text.lastIndexOf(')') + 3) !== 'Z';
    } catch {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pid a fake's `{child: true}` printed, from a session's text. */
export const childPidOf = (text: string | undefined): number => Number(/child:(\d+)/.exec(text ?? '')?.[1]);
