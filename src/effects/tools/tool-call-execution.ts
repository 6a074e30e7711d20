import { EMPTY, Observable, catchError, filter, finalize, ignoreElements, map, merge, mergeMap, of, takeUntil, tap } from 'rxjs';
import { toolCall } from '../../reducers/tool-call/machine.js';
import type { ToolCallEvent } from '../../reducers/tool-call/schema.js';
import type { RuneOf } from '../../reducers/rune.js';
import type { EpicCommand, EpicContext } from '../../streams/epic.js';
import { INTERRUPTED_BY_RESTART } from '../tool-call-recovery.js';
import { errorText } from '../../reducers/error-text.js';
import { runTool } from './run-tool.js';
import { callState$, storedCalls } from './stored-calls.js';
import type { ToolRegistry } from './tool-registry.js';

const TERMINAL: ReadonlySet<string> = new Set(toolCall.terminal);

/** Options of {@link toolCallExecution}. */
export interface ToolCallExecutionOptions {
  readonly registry: ToolRegistry;
  /**
   * The calls this `toolCallEffects` has started and that have not reached their outcome yet,
   * shared by all its subscriptions: the one owner of each execution, so nothing starts a call
   * twice (not a second subscription hearing the same rune, not the restart listing).
   */
  readonly owned: Set<string>;
  /**
   * List the stored calls left `executing` by a crash: run again those whose tool is `rerunSafe`,
   * end the others with "interrupted by restart".
   */
  readonly resume: boolean;
}

/**
 * The execution step of the tool-call effects.
 *
 * 1. The live rune that moves a call into `executing` (`no_approval_needed`, `auto_approved`, or
 *    `approved`: the approval itself is the continuation) runs its tool once (see `runTool`):
 *    progress chunks become `progress_update`, the outcome `success` / `execution_error` /
 *    `execution_timeout`.
 * 2. A call that cannot run (unknown tool, bad arguments) ends with `execution_error` naming what
 *    was wrong, so the model gets a `tool.result` and the turn goes on.
 * 3. When the call leaves `executing` any other way (a `cancelled` rune), the run is unsubscribed:
 *    the tool's signal aborts, with the reason.
 * 4. Exactly once: the machine accepts only the first `approved`, so only one rune moves a call
 *    into `executing`; and a call started here is never started again until its outcome (`owned`),
 *    not by a second subscription, not by the restart listing.
 * 5. With `resume`: each stored call left `executing` (its run died with the process) whose tool
 *    is `rerunSafe` runs again, with a full `timeoutMs` from now; every other one ends with
 *    `execution_error` "interrupted by restart", as `toolCallRecovery` does. Either way it gets
 *    exactly one `tool.result`.
 *
 * Each run has its own `catchError` and `takeUntil`: one call's failure never ends the others.
 *
 * @param calls$ the live runes of `tool-call` streams.
 */
export function toolCallExecution(calls$: Observable<RuneOf<typeof toolCall>>, context: EpicContext, options: ToolCallExecutionOptions): Observable<EpicCommand> {
  const { registry, owned, resume } = options;

  const execution = (stream: string, leftByCrash: boolean): Observable<EpicCommand> => {
    if (owned.has(stream)) return EMPTY;
    owned.add(stream);
    let started = false;
    let stopReason = 'the engine stopped its effects';
    const left$ = calls$.pipe(
      filter((rune) => rune.stream === stream && rune.to !== 'executing'),
      tap(({ event }) => {
        stopReason = event.type === 'cancelled' ? `call cancelled${event.reason === undefined ? '' : `: ${event.reason}`}` : `call ended by ${event.type}`;
      }),
    );
    return callState$(context, stream).pipe(
      mergeMap((state): Observable<ToolCallEvent> => {
        if (state?.value !== 'executing') return EMPTY; // it moved on before it could start
        started = true;
        if (leftByCrash && !registry.rerunSafe(state)) return of({ type: 'execution_error', error: INTERRUPTED_BY_RESTART });
        const resolved = registry.resolve(state);
        if (!resolved.ok) return of({ type: 'execution_error', error: resolved.error });
        return runTool(resolved.tool, resolved.input, context.scheduler, () => stopReason);
      }),
      takeUntil(left$),
      map((event): EpicCommand => ({ stream, event })),
      catchError((error: unknown) => of<EpicCommand>({ stream, event: { type: 'execution_error', error: `the tool runner failed: ${errorText(error)}` } })),
      // A started call stays owned until its outcome rune (below): a sync tool ends before a
      // second subscription hears the rune that started it.
      finalize(() => {
        if (!started) owned.delete(stream);
      }),
    );
  };
  const outcomes$ = calls$.pipe(
    filter((rune) => rune.to !== undefined && TERMINAL.has(rune.to)),
    tap((rune) => owned.delete(rune.stream)),
    ignoreElements(),
  );

  const started$ = calls$.pipe(
    filter((rune) => rune.to === 'executing' && rune.from !== 'executing'),
    mergeMap((rune) => execution(rune.stream, false)),
  );
  const rerun$ = resume ? storedCalls(calls$, context, ['executing']).pipe(mergeMap((head) => execution(head.stream, true))) : EMPTY;
  return merge(outcomes$, started$, rerun$);
}
