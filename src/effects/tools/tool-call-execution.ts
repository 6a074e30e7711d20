import { EMPTY, Observable, catchError, concat, defer, map, mergeMap, of, tap, timer, type SchedulerLike } from 'rxjs';
import type { toolCall } from '../../reducers/tool-call/machine.js';
import type { ToolCallEvent, ToolCallState } from '../../reducers/tool-call/schema.js';
import type { DispatchCommand, EpicContext } from '../../streams/epic.js';
import type { StreamView } from '../../streams/state-effects.js';
import { INTERRUPTED_BY_RESTART, executionStart } from '../tool-call-recovery.js';
import { errorText } from '../../reducers/error-text.js';
import { checkedClaim, claimCallThenRun } from './claim-execution.js';
import { MAX_TIMER_MS, runTool } from './run-tool.js';
import { storableOutcome } from './tool-result-limits.js';
import type { ToolRegistry } from './tool-registry.js';
import type { ToolScope } from './tool-scope.js';

/** Why a run is stopped, for its tool's abort reason: the rune that took its call out of `executing`. */
function stopReason(view: StreamView<typeof toolCall>): string {
  const event = view.cancelledBy?.event;
  if (event === undefined) return 'the engine stopped its effects';
  if (event.type === 'cancelled') return `call cancelled${event.reason === undefined ? '' : `: ${event.reason}`}`;
  return `call ended by ${event.type}`;
}

/**
 * A run's events, then, if its outcome was not a timeout, `execution_timeout` once `timeoutMs`
 * have passed since the run started. The execution effect is unsubscribed by the rune of the
 * outcome (the call leaves `executing`), so that timeout is emitted only when the outcome left no
 * rune: its dispatch was refused or failed, and without it the call would stay `executing` forever
 * (the run's own timer stops with the run). Once, so a store that keeps failing is not hammered:
 * a restart resumes the call (see `executionStart`).
 */
function timeoutWhateverHappens(run$: Observable<ToolCallEvent>, timeoutMs: number, scheduler: SchedulerLike): Observable<ToolCallEvent> {
  if (!(timeoutMs <= MAX_TIMER_MS)) return run$; // Infinity: the call has no timeout
  return defer(() => {
    const deadline = scheduler.now() + timeoutMs;
    let timedOut = false;
    return concat(
      run$.pipe(tap((event) => (timedOut ||= event.type === 'execution_timeout'))),
      defer(() => (timedOut ? EMPTY : timer(Math.max(0, deadline - scheduler.now()), scheduler).pipe(map((): ToolCallEvent => ({ type: 'execution_timeout' }))))),
    );
  });
}

/** What {@link execution$} runs calls with. */
export interface ExecutionOptions {
  readonly registry: ToolRegistry;
  /** Tools whose calls another effect runs (a delegation). */
  readonly runElsewhere: ReadonlySet<string>;
  /** Which tools a call may run; absent: every tool of the registry. */
  readonly scope?: ToolScope | undefined;
  /** A new claim id, unique across the processes sharing the log: one per run. */
  readonly claimId: () => string;
}

/**
 * The execution effect of a call in `executing`: one run of its tool (see `runTool`), claimed
 * before it starts, as the events that end the call.
 *
 * 1. A call moved into `executing` by a live rune (`no_approval_needed`, `auto_approved`, or
 *    `approved`: the approval itself is the continuation) is claimed (`execution_claimed`, see
 *    `claimThenRun`), and its tool runs only once the claim recorded is this run's: progress
 *    chunks become `progress_update`, the outcome `success` / `execution_error` / `execution_timeout`.
 * 2. A call that cannot run (unknown tool, bad arguments) ends with `execution_error` naming what
 *    was wrong, unclaimed, so the model gets a `tool.result` and the turn goes on.
 * 3. A call found `executing` when this process took it over (`resumed`) is decided by
 *    `executionStart`: unclaimed, it never started, so it is claimed and run; claimed, it started
 *    and its run died: it is claimed again, superseding that claim, if its tool is `rerunSafe`
 *    (with a full `timeoutMs` from now), and any other ends with `execution_error` "interrupted by
 *    restart". Either way it gets exactly one `tool.result`.
 * 4. A call of a tool in `runElsewhere` is left to the effect that runs it (a delegation).
 *    A call of a tool outside its caller's `scope` ends with `execution_error` giving the
 *    scope's reason (the tool and the caller's role): the tool does not run.
 * 5. The run is unsubscribed when the call leaves `executing` any other way (a `cancelled` rune):
 *    the tool's signal aborts, with the reason.
 * 6. A result the engine would refuse (past its `limits`, see `storableOutcome`) ends the call
 *    with `execution_error` "tool result too large: ...". And whatever became of the outcome's
 *    dispatch (refused, or failed in the store), a call still `executing` at its tool's
 *    `timeoutMs` from the start ends with `execution_timeout` (see `timeoutWhateverHappens`).
 *
 * Exactly once: the machine records one claim per run and refuses a second claim (or a re-run
 * naming a claim that is not the current one), so of two runners, in one process or two, only
 * the one whose claim is recorded starts the tool.
 */
export function execution$(view: StreamView<typeof toolCall>, context: EpicContext, options: ExecutionOptions): Observable<ToolCallEvent | DispatchCommand> {
  const { registry, runElsewhere, scope, claimId } = options;
  const run = (state: ToolCallState): Observable<ToolCallEvent | DispatchCommand> => {
    const start = executionStart(state, view.origin, registry.rerunSafe(state));
    if (start.action === 'leave') return EMPTY;
    if (start.action === 'interrupt') return of({ type: 'execution_error', error: INTERRUPTED_BY_RESTART });
    const resolved = registry.resolve(state);
    if (!resolved.ok) return of({ type: 'execution_error', error: resolved.error });
    const { tool, input } = resolved;
    const outcome$ = runTool(tool, input, context.scheduler, () => stopReason(view)).pipe(map((event) => storableOutcome(event, context.valueCheck)));
    // What the run made, its runes' origin the tool's (the claim before it is the epic's).
    const run$ = timeoutWhateverHappens(outcome$, tool.timeoutMs, context.scheduler).pipe(map((event): DispatchCommand => ({ stream: view.stream, event, by: 'tool' })));
    return defer(() => claimCallThenRun(view, checkedClaim(claimId), start.supersedes, run$));
  };
  return view.state$.pipe(
    mergeMap((state): Observable<ToolCallEvent | DispatchCommand> => {
      if (state?.value !== 'executing') return EMPTY; // it moved on before it could start
      if (runElsewhere.has(state.toolName)) return EMPTY; // another effect runs it, and resumes it after a restart
      if (scope === undefined) return run(state);
      return scope(view.stream, state.toolName, context).pipe(
        mergeMap((refused) => (refused === undefined ? run(state) : of<ToolCallEvent>({ type: 'execution_error', error: refused }))),
      );
    }),
    catchError((error: unknown) => of<ToolCallEvent>({ type: 'execution_error', error: `the tool runner failed: ${errorText(error)}` })),
  );
}
