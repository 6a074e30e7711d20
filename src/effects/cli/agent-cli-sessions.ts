import { EMPTY, Observable, defaultIfEmpty, defer, finalize, map, max, mergeMap, of, switchMap, take } from 'rxjs';
import { agentManagerSession } from '../../reducers/agent-manager-session/machine.js';
import type { AgentManagerSessionEvent, AgentManagerSessionState, AgentManagerSessionStateName } from '../../reducers/agent-manager-session/schema.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicContext } from '../../streams/epic.js';
import type { EffectsByKey, StreamView } from '../../streams/state-effects.js';
import type { AgentCliSpec, CliRun, CliRunStart } from './cli-adapter.js';
import { cliError } from './cli-errors.js';
import { cliProcess } from './cli-process.js';
import { cliRun$, stateNowOf } from './cli-run.js';
import { CliSessionLimits, cliSessionSlots } from './cli-session-limits.js';
import { RUN_STARTING_EVENTS, type CliSessionOwners } from './cli-session-owners.js';
import type { SpawnCliProcess } from './spawn-cli-process.js';

type Session = typeof agentManagerSession;

/** Options of {@link agentCliSessions}. */
export interface AgentCliSessionsOptions extends CliSessionLimits {
  /** The CLIs sessions may run, by the name a session's `cli` input gives. */
  readonly clis: Readonly<Record<string, AgentCliSpec>>;
  /** The CLI of a session that names none. Default: none (such a session gets `unknown_cli`). */
  readonly defaultCli?: string;
  /**
   * Told each output an adapter ignored (a line no event matches), with its reason: at most
   * `maxIgnoredPerRun` a run, then once how many more. Default: reported on the engine's
   * `errors$` as `{type: 'output_ignored', epic, stream, reason}`.
   */
  readonly onIgnored?: (stream: string, reason: string) => void;
  /** How many ignored outputs of one run are told. Default 20. */
  readonly maxIgnoredPerRun?: number;
  /**
   * Who started each session's run (see {@link CliSessionOwners}), what `maxSessionsPerIdentity`
   * counts by: the same object the server's `onDrive` tells. Default: none, and only
   * `maxRunningSessions` applies.
   */
  readonly owners?: CliSessionOwners;
  /**
   * What makes each run's process, told its options (the CLI's command, arguments, cwd, env, idle
   * timeout, the engine's scheduler) and whom it is for (`{stream, cli, run}`). Default
   * `cliProcess`: an OS process. Another function replaces only the OS process: it gives what
   * `cliProcess` gives (`spawned` with the io the adapter uses, then `exit`, or a `CliProcessError`),
   * so the adapters, the limits, the idle timeout and the `process_error` codes work as with a real
   * process. `inProcessCli(options, program)` makes one of a program in this process (its idle
   * clock is `cliProcess`' own): for tests and a simulation, where no real process may run.
   *
   * An option of the epic rather than of a CLI's spec: specs are configuration (`runestream serve`
   * reads them from JSON), while how processes are made is the runner's dependency, as its
   * scheduler is; the function still sees each spec's command, so one function serves every CLI.
   */
  readonly spawnProcess?: SpawnCliProcess;
}

/** The states in which a session's CLI process runs: an interactive CLI's lives across turns. */
const PROCESS_STATES: Readonly<Record<'interactive' | 'oneShot', ReadonlySet<AgentManagerSessionStateName>>> = {
  interactive: new Set(['creating', 'streaming', 'waiting_approval', 'waiting_input', 'completed']),
  oneShot: new Set(['creating', 'streaming', 'waiting_approval']),
};
/** Where a process died with the old server: the machine takes these to `error` or `paused`. */
const LOSES_PROCESS = new Set<string>(['creating', 'streaming', 'waiting_approval']);
const OPTIONS = ['clis', 'defaultCli', 'onIgnored', 'maxIgnoredPerRun', 'maxRunningSessions', 'maxSessionsPerIdentity', 'owners', 'spawnProcess'];
const SPEC_FIELDS = ['adapter', 'command', 'args', 'env', 'cwd', 'idleTimeoutMs', 'killGraceMs'];

/** The reason of the `process_lost` a session gets when its process died with the server that ran it. */
export const PROCESS_LOST_REASON = 'the CLI process ended with the runestream server that ran it; resume_session starts a new one';

/**
 * Agent CLI sessions (seed 001's Agent Manager): every `agent-manager-session` stream runs the
 * configured CLI its `cli` input names (or `defaultCli`), one process per run, mapped to the
 * session's events by the CLI's adapter (see {@link AgentCliAdapter}).
 *
 * 1. `start_session` starts a run `{type: 'new_task', prompt}`: the process is spawned (see
 *    `cliProcess`: its own process group, a safe environment, an idle timeout; or what
 *    `spawnProcess` makes) and the adapter's events are dispatched to the session; what it
 *    ignores is told (`onIgnored`), bounded.
 * 2. A session naming an unknown CLI gets `process_error` `unknown_cli:` with the configured
 *    names. A client names a CLI, never a command.
 * 3. A CLI whose adapter is not `interactive` (NDJSON) cannot be answered while it runs: a session
 *    not in auto-approve mode is refused at start (`approval_unsupported:`), so `approve_action`
 *    never applies to one; `send_message` from `waiting_input` or `completed`, and
 *    `resume_session` / `retry`, start a new process (`follow_up` / `resume`) with the CLI's
 *    `sessionId` and `afterTs`, the largest `ts` of the CLI's events in the log (so history it
 *    prints again is skipped). Its process runs in `creating`, `streaming`, `waiting_approval`.
 * 4. An `interactive` CLI's (ACP's) process lives across turns (`creating` through `completed`):
 *    the user's `send_message`, `approve_action` and `reject_action` reach its adapter's `user$`.
 *    A new `start_session` ends it and starts another; a `send_message` after it exited starts a
 *    `follow_up` run.
 * 5. Leaving those states (`cancel_session`, an error, a pause) or closing the engine ends the
 *    process and its children: SIGTERM, then SIGKILL after `killGraceMs`; nothing more of that run
 *    is dispatched. A process that exits: the adapter's events, then `process_exit{code}` (a
 *    non-zero code after `process_error` `exit_code:` with the end of its stderr). A spawn failure
 *    (`spawn_failed:`), an idle timeout (`idle_timeout:`) or an adapter's error (`drive_failed:`,
 *    a run its `launch` refuses too) is a `process_error`.
 * 6. At most `maxRunningSessions` processes run at once (default 16), and at most
 *    `maxSessionsPerIdentity` (default 4) that one identity started (told by `owners`): a run past
 *    either starts no process, and its session gets `process_error` `too_many_sessions:` naming the
 *    limit, so it goes to `error` (as for a spawn that failed) and `retry` starts it once one ended.
 * 7. Restart: the effects follow from each session's state (see `stateEffects`), so a session
 *    found in a state whose process died with the old server gets `process_lost`
 *    ({@link PROCESS_LOST_REASON}): `creating` becomes `error`, `streaming` and the waiting states
 *    `paused`, offered for resume; `resume_session` then starts a new run. A one-shot CLI's
 *    session in `waiting_input` or `completed` had no process and stays as it is.
 *
 * ## Example
 * ```ts
 * import { createEngine } from 'runestream';
 * import { agentCliSessions, type AgentCliAdapter } from 'runestream/agents';
 * import { of } from 'rxjs';
 * // A stand-in adapter for a "CLI" that is node itself, printing nothing.
 * const adapter: AgentCliAdapter = { protocol: 'ndjson', interactive: false, launch: () => ({ args: ['-e', ''] }), drive: () => of() };
 * const engine = createEngine({ epics: [agentCliSessions({ clis: { node: { adapter, command: process.execPath, cwd: '.' } }, defaultCli: 'node' })] });
 * await engine.spawn('session-1', 'agent-manager-session', { cli: 'nope', autoApprove: true });
 * const error = new Promise((resolve) => engine.state$<{ value: string; error?: string }>('session-1').subscribe((s) => s.value === 'error' && resolve(s.error)));
 * await engine.dispatch('session-1', { type: 'start_session', prompt: 'hi' });
 * console.log(await error);
 * // Logs: unknown_cli: no agent CLI "nope" is configured; the configured ones are: node
 * await engine.close();
 * ```
 */
export function agentCliSessions(options: AgentCliSessionsOptions): Epic {
  for (const key of Object.keys(options ?? {})) {
    if (!OPTIONS.includes(key)) throw new TypeError(`agentCliSessions: unknown option "${key}"; the options are ${OPTIONS.join(', ')}`);
  }
  const {
    clis,
    defaultCli,
    onIgnored,
    maxIgnoredPerRun = 20,
    owners,
    maxRunningSessions,
    maxSessionsPerIdentity,
    spawnProcess = cliProcess,
  } = options ?? ({} as AgentCliSessionsOptions);
  if (typeof clis !== 'object' || clis === null) throw new TypeError('agentCliSessions: "clis" must be an object of CLI specs by name');
  for (const [name, spec] of Object.entries(clis)) checkSpec(name, spec);
  if (defaultCli !== undefined && !Object.hasOwn(clis, defaultCli)) {
    throw new TypeError(`agentCliSessions: "defaultCli" names "${defaultCli}", which "clis" does not hold (it holds: ${Object.keys(clis).join(', ') || 'none'})`);
  }
  if (!Number.isInteger(maxIgnoredPerRun) || maxIgnoredPerRun < 0) {
    throw new TypeError(`agentCliSessions: "maxIgnoredPerRun" must be a non-negative integer, got ${String(maxIgnoredPerRun)}`);
  }
  const limits = CliSessionLimits.safeParse({ maxRunningSessions, maxSessionsPerIdentity });
  if (!limits.success) {
    const issue = limits.error.issues[0]!;
    throw new TypeError(`agentCliSessions: "${issue.path.join('.')}" must be a positive integer up to 10,000 (${issue.message})`);
  }
  if (owners !== undefined && (typeof owners.take !== 'function' || typeof owners.driven !== 'function')) {
    throw new TypeError('agentCliSessions: "owners" must be what cliSessionOwners() returns');
  }
  if (typeof spawnProcess !== 'function')
    throw new TypeError('agentCliSessions: "spawnProcess" must be a function (options, {stream, cli, run}) => Observable of CliProcessEvent');
  const names = Object.keys(clis);
  const specOf = (state: AgentManagerSessionState): { name: string; spec: AgentCliSpec | undefined } => {
    const name = state.cli ?? defaultCli ?? '';
    return { name, spec: Object.hasOwn(clis, name) ? clis[name] : undefined };
  };

  return function agentCliSessions(runes$, context, deps) {
    /** The sessions with a run under way, by that run's token: a `send_message` to an interactive CLI reaches it rather than starting another. */
    const alive = new Map<string, object>();
    /** The processes running now, in total and by who started them. */
    const slots = cliSessionSlots(limits.data);
    const ignored = (stream: string, reason: string): void =>
      onIgnored !== undefined ? onIgnored(stream, reason) : context.report?.({ type: 'output_ignored', epic: 'agentCliSessions', stream, reason });

    const run$ = (view: StreamView<Session>, state: AgentManagerSessionState, name: string, spec: AgentCliSpec): Observable<AgentManagerSessionEvent> => {
      const { stream } = view;
      const start = runStart(view, state);
      return defer(() => {
        const release = slots.take(owners?.take(stream));
        if (typeof release === 'string') return of({ type: 'process_error' as const, error: release });
        const token = {};
        alive.set(stream, token);
        return afterTs$(start, stream, context).pipe(
          switchMap((afterTs) => {
            const run: CliRun = {
              start,
              autoApprove: state.autoApprove,
              cwd: spec.cwd,
              ...(state.sessionId === undefined ? {} : { sessionId: state.sessionId }),
              ...(afterTs === undefined ? {} : { afterTs }),
            };
            return cliRun$(spec, run, {
              stream,
              cliName: name,
              spawnProcess,
              scheduler: context.scheduler,
              later$: view.later$,
              stateNow: stateNowOf(context, stream),
              ignored: (reason) => ignored(stream, reason),
              maxIgnored: maxIgnoredPerRun,
            });
          }),
          finalize(() => {
            release();
            if (alive.get(stream) === token) alive.delete(stream);
          }),
        );
      });
    };

    /** A live view: the run due in its state, or the reason none can run. */
    const liveEffects = (view: StreamView<Session>, state: AgentManagerSessionState): EffectsByKey<Session> => {
      const { name, spec } = specOf(state);
      if (spec === undefined) {
        const known = names.length > 0 ? `the configured ones are: ${names.join(', ')}` : 'none is configured';
        const what = name === '' ? 'the session names no agent CLI and there is no default' : `no agent CLI "${name}" is configured`;
        return { run: of({ type: 'process_error', error: cliError('unknown_cli', `${what}; ${known}`) }) };
      }
      if (!PROCESS_STATES[spec.adapter.interactive ? 'interactive' : 'oneShot'].has(view.value!)) return {};
      if (!spec.adapter.interactive && !state.autoApprove) {
        const error = cliError(
          'approval_unsupported',
          `"${name}" (${spec.adapter.protocol}) cannot be answered while it runs, so it cannot wait for approval: spawn the session with {autoApprove: true}, or use an interactive (ACP) CLI`,
        );
        return { run: of({ type: 'process_error', error }) };
      }
      return { run: run$(view, state, name, spec) };
    };

    /** A session found in a state its process held when the server that ran it stopped. */
    const resumedEffects = (view: StreamView<Session>): EffectsByKey<Session> => {
      if (LOSES_PROCESS.has(view.value!)) return { lost: of(PROCESS_LOST) };
      if (view.value !== 'waiting_input') return {}; // completed: nothing to lose; a follow-up starts a run
      // Only an interactive CLI holds a process while the user answers.
      const lost$ = view.state$.pipe(
        take(1),
        mergeMap((state) => (state !== undefined && specOf(state).spec?.adapter.interactive === true ? of(PROCESS_LOST) : EMPTY)),
      );
      return { lost: lost$ };
    };

    return stateEffects({
      name: 'agentCliSessions',
      machine: agentManagerSession,
      states: [...PROCESS_STATES.interactive],
      // A new task ends a process that is still there; a message to a CLI whose process is gone starts one.
      restartOn: (rune) => rune.event.type === 'start_session' || (RUN_STARTING_EVENTS.has(rune.event.type) && !alive.has(rune.stream)),
      effects: (view): EffectsByKey<Session> => {
        if (view.origin === 'resumed') return resumedEffects(view);
        // A live rune's stream is in memory: its state is read at once.
        const state = context.state(view.stream, agentManagerSession);
        if (state !== undefined) return liveEffects(view, state);
        const decided$ = view.state$.pipe(
          take(1),
          switchMap((s) => (s === undefined ? EMPTY : (liveEffects(view, s).run ?? EMPTY))),
        );
        return { run: decided$ };
      },
    })(runes$, context, deps);
  };
}

const PROCESS_LOST = { type: 'process_lost', reason: PROCESS_LOST_REASON } as const;

/** Why the run of a live view starts: the rune that led to it. */
function runStart(view: StreamView<Session>, state: AgentManagerSessionState): CliRunStart {
  const event = view.rune?.event;
  if (event?.type === 'start_session') return { type: 'new_task', prompt: event.prompt };
  if (event?.type === 'send_message') return { type: 'follow_up', text: event.text };
  // A process wanted and none running otherwise: the CLI takes its task up again.
  return state.sessionId === undefined && state.prompt !== undefined ? { type: 'new_task', prompt: state.prompt } : { type: 'resume' };
}

/** A follow-up or resumed run: the largest `ts` of the CLI's events in the log, read from the store. */
const afterTs$ = (start: CliRunStart, stream: string, context: EpicContext): Observable<number | undefined> =>
  start.type === 'new_task'
    ? of(undefined)
    : defer(() => context.read(stream)).pipe(
        map((rune) => {
          const ts = (rune.event as { ts?: unknown }).ts;
          return typeof ts === 'number' ? ts : -1;
        }),
        max(),
        defaultIfEmpty(-1),
        map((ts) => (ts >= 0 ? ts : undefined)),
      );

/** Throws a TypeError naming what is wrong with a configured CLI. */
function checkSpec(name: string, spec: AgentCliSpec): void {
  const at = `agentCliSessions: CLI "${name}"`;
  if (typeof spec !== 'object' || spec === null) throw new TypeError(`${at} must be an object with adapter, command and cwd`);
  for (const key of Object.keys(spec)) if (!SPEC_FIELDS.includes(key)) throw new TypeError(`${at}: unknown field "${key}"; the fields are ${SPEC_FIELDS.join(', ')}`);
  const { adapter } = spec;
  if (typeof adapter?.launch !== 'function' || typeof adapter.drive !== 'function' || typeof adapter.interactive !== 'boolean') {
    throw new TypeError(`${at}: "adapter" must be an AgentCliAdapter (launch, drive, interactive)`);
  }
  if (typeof spec.command !== 'string' || spec.command.length === 0) throw new TypeError(`${at}: "command" must be a non-empty string`);
  if (typeof spec.cwd !== 'string' || spec.cwd.length === 0) throw new TypeError(`${at}: "cwd" must be a non-empty string`);
  if (spec.args !== undefined && (!Array.isArray(spec.args) || !spec.args.every((arg) => typeof arg === 'string')))
    throw new TypeError(`${at}: "args" must be an array of strings`);
  for (const key of ['idleTimeoutMs', 'killGraceMs'] as const) {
    const value = spec[key];
    if (value !== undefined && !(value > 0)) throw new TypeError(`${at}: "${key}" must be a positive number, got ${String(value)}`);
  }
}
