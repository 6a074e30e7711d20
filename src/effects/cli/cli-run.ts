import { BehaviorSubject, EMPTY, Observable, ReplaySubject, catchError, concatMap, defer, filter, finalize, map, mergeMap, of, type SchedulerLike } from 'rxjs';
import { agentManagerSession } from '../../reducers/agent-manager-session/machine.js';
import type { AgentManagerSessionEvent, AgentManagerSessionStateName } from '../../reducers/agent-manager-session/schema.js';
import { agentManagerUiFlags } from '../../reducers/agent-manager-session/ui-flags.js';
import { errorText } from '../../reducers/error-text.js';
import type { RuneOf } from '../../reducers/rune.js';
import type { EpicContext } from '../../streams/epic.js';
import type { AgentCliSpec, CliLaunch, CliRun, CliUserEvent } from './cli-adapter.js';
import { cliError } from './cli-errors.js';
import { CliProcessError, type CliProcessEvent, type CliProcessOptions, type SpawnCliProcess } from './spawn-cli-process.js';

type Session = typeof agentManagerSession;

/** What one run needs besides its spec: where its events go, and what it tells. */
export interface CliRunContext {
  /** The session's stream. */
  readonly stream: string;
  /** The configured CLI's name, for messages. */
  readonly cliName: string;
  /** What makes the run's process (`agentCliSessions`' `spawnProcess`). */
  readonly spawnProcess: SpawnCliProcess;
  readonly scheduler: SchedulerLike;
  /** The stream's later runes (the view's `later$`): the user's runes reach an interactive adapter from here. */
  readonly later$: Observable<RuneOf<Session>>;
  /** The session's state now, when it is in memory: whether an exit's error text applies, whether the CLI works. */
  readonly stateNow: () => { readonly value: AgentManagerSessionStateName } | undefined;
  /** Told what the adapter ignored, at most `maxIgnored` times a run, then how many more. */
  readonly ignored: (reason: string) => void;
  readonly maxIgnored: number;
}

/** The user's runes an interactive CLI is told of. */
const USER_EVENTS = new Set<string>(['send_message', 'approve_action', 'reject_action']);
/** How many of the user's runes a run keeps for its adapter while its process starts. */
const USER_BUFFER = 64;
/** States in which `process_error` is accepted: an exit's error text goes there (elsewhere only its code). */
const ERROR_TEXT_STATES = new Set<string>(['creating', 'streaming', 'waiting_approval', 'waiting_input', 'completed', 'paused']);

/**
 * Whether the CLI is expected to print in a session state: where seed 001 shows its spinner
 * (`creating`, `streaming`). Elsewhere it waits for a person, so its process's idle clock stops.
 */
const works = (value: AgentManagerSessionStateName | undefined): boolean => value === undefined || agentManagerUiFlags({ value, autoApprove: false }).showSpinner;

/**
 * One run of a configured CLI for a session, as the session's events: the process is spawned on
 * subscribe and ended on unsubscribe; the adapter's events in order, then the exit: a non-zero one
 * as `process_error` (`exit_code:`, with the end of stderr) where the state takes it, then
 * `process_exit{code}`. A spawn failure, an idle timeout or an adapter's error (its `launch`
 * throwing too: no process is started) is one `process_error`, and the run ends (its process with it). The idle timeout counts only while the
 * session is `creating` or `streaming` (the process's `working$`): not while it waits for a person.
 */
export function cliRun$(spec: AgentCliSpec, run: CliRun, context: CliRunContext): Observable<AgentManagerSessionEvent> {
  return defer(() => {
    const { adapter } = spec;
    let launch: CliLaunch;
    try {
      launch = adapter.launch(run);
    } catch (error) {
      // A run the adapter cannot start (a follow-up without the CLI's session id): the session hears why, rather than waiting for a process that never comes.
      return of({ type: 'process_error' as const, error: runErrorText(new DriveError(error), context.cliName) });
    }
    // Heard from the start of the run, so an answer given while the process starts is not lost.
    const user = new ReplaySubject<CliUserEvent>(USER_BUFFER);
    const userSubscription = context.later$
      .pipe(
        filter((rune) => USER_EVENTS.has(rune.event.type)),
        map((rune) => rune.event as CliUserEvent),
      )
      .subscribe(user);
    const working = new BehaviorSubject(works(context.stateNow()?.value));
    userSubscription.add(context.later$.subscribe((rune) => rune.to !== undefined && working.next(works(rune.to))));
    let ignoredCount = 0;
    const ignore = (reason: string): void => {
      if (++ignoredCount <= context.maxIgnored) context.ignored(reason);
    };
    const exited = (event: Extract<CliProcessEvent, { type: 'exit' }>): Observable<AgentManagerSessionEvent> => {
      const exit = { type: 'process_exit' as const, code: event.code };
      const value = context.stateNow()?.value;
      if (event.code === 0 || value === undefined || !ERROR_TEXT_STATES.has(value)) return of(exit);
      const stderr = event.stderr.trim();
      const error = cliError('exit_code', `"${context.cliName}" exited with code ${event.code}${stderr.length > 0 ? `: ${stderr}` : ''}`);
      return of({ type: 'process_error' as const, error }, exit);
    };
    const options: CliProcessOptions = {
      command: spec.command,
      args: [...(spec.args ?? []), ...launch.args],
      cwd: spec.cwd,
      ...(spec.env === undefined ? {} : { env: spec.env }),
      ...(launch.stdin === undefined ? {} : { stdin: launch.stdin }),
      ...(launch.endStdin === undefined ? {} : { endStdin: launch.endStdin }),
      ...(spec.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: spec.idleTimeoutMs }),
      working$: working.asObservable(),
      ...(spec.killGraceMs === undefined ? {} : { killGraceMs: spec.killGraceMs }),
      scheduler: context.scheduler,
    };
    // defer: a spawn function that throws is a run that failed to start, not a failed epic.
    return defer(() => context.spawnProcess(options, { stream: context.stream, cli: context.cliName, run })).pipe(
      // The adapter has every line before the exit is told: `exit` waits for `drive` to complete.
      concatMap((event) => {
        if (event.type === 'exit') return exited(event);
        return adapter.drive(event.io, run, user.asObservable()).pipe(
          mergeMap((output) => {
            if ('event' in output) return of(output.event);
            ignore(output.ignored);
            return EMPTY;
          }),
          catchError((error: unknown) => {
            throw new DriveError(error);
          }),
        );
      }),
      catchError((error: unknown) => of({ type: 'process_error' as const, error: runErrorText(error, context.cliName) })),
      finalize(() => {
        userSubscription.unsubscribe();
        if (ignoredCount > context.maxIgnored)
          context.ignored(`${ignoredCount - context.maxIgnored} more outputs of this run were ignored (only the first ${context.maxIgnored} are told)`);
      }),
    );
  });
}

/** An adapter's own failure, told apart from the process's. */
class DriveError extends Error {
  constructor(readonly error: unknown) {
    super(errorText(error));
  }
}

const runErrorText = (error: unknown, cliName: string): string => {
  if (error instanceof CliProcessError) return cliError(error.code, `${error.detail}${error.stderr.trim().length > 0 ? `; stderr: ${error.stderr.trim()}` : ''}`);
  if (error instanceof DriveError) return cliError('drive_failed', `the "${cliName}" adapter failed: ${error.message}`);
  return cliError('drive_failed', errorText(error));
};

/** The context a run needs from an epic's. */
export const stateNowOf =
  (context: EpicContext, stream: string): CliRunContext['stateNow'] =>
  () =>
    context.state(stream, agentManagerSession);
