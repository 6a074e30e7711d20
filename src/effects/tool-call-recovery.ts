import { EMPTY, Observable, filter } from 'rxjs';
import { toolCall } from '../reducers/tool-call/machine.js';
import type { ToolCallInput, ToolCallState } from '../reducers/tool-call/schema.js';
import type { Epic, EpicCommand } from '../streams/epic.js';

/** The error a tool call interrupted by a restart ends with. */
export const INTERRUPTED_BY_RESTART = 'interrupted by restart';

/** Options of {@link toolCallRecovery}, with their defaults. */
export interface ToolCallRecoveryOptions {
  /**
   * Which calls left executing are run again by another effect (`toolCallEffects` re-runs those
   * whose tool is `rerunSafe`), so this one leaves them alone. It is given the call (`callId`,
   * `toolName`, `arguments`). Default: none, every such call is interrupted.
   */
  rerun?: (call: ToolCallInput) => boolean;
}

/**
 * Ends every tool call that was `executing` when the engine last stopped: when the epic starts, each
 * such call gets `execution_error` with "interrupted by restart", so it has exactly one
 * `tool.result` (INV-TOOL-TERMINAL) and the next model call never sees an orphan tool call. Its
 * execution died with the process; whether to run it again is the caller's decision: calls for
 * which `rerun(call)` is true are left to whatever runs them again.
 *
 * It lists the stored calls once per engine, at its first subscription: if that listing fails the
 * failure is reported and the calls wait for the next start, rather than risk ending calls this
 * process is running. Exactly one result: the result is a dispatch like any other, so if the process dies before it is
 * durable the next start sends it again, and once it is durable the call is terminal and a second
 * one would be refused.
 *
 * ## Example
 * ```ts
 * import { createEngine, sqliteStore, toolCallRecovery } from 'runestream';
 * const engine = createEngine({ store: sqliteStore('agents.db'), epics: [toolCallRecovery()] });
 * ```
 */
export function toolCallRecovery(options: ToolCallRecoveryOptions = {}): Epic {
  const { rerun } = options;
  if (rerun !== undefined && typeof rerun !== 'function') {
    throw new TypeError(`toolCallRecovery: "rerun" must be a function of the call, got ${typeof rerun}`);
  }
  /** A `rerun` that throws cannot vouch for the call: it is interrupted. */
  const reruns = (call: ToolCallInput): boolean => {
    try {
      return rerun?.(call) === true;
    } catch {
      return false;
    }
  };
  // Once per engine: a resubscription after a failure would find this process's own calls
  // executing and take them for leftovers of a crash.
  let listed = false;
  return function toolCallRecovery(runes$, context) {
    if (listed) return EMPTY;
    listed = true;
    return new Observable<EpicCommand>((subscriber) => {
      const interrupt = (stream: string): void => subscriber.next({ stream, event: { type: 'execution_error', error: INTERRUPTED_BY_RESTART } });
      /** Whether a call in memory is one that something runs again. */
      const rerunsInMemory = (stream: string): boolean => {
        const state = rerun === undefined ? undefined : context.state<ToolCallState>(stream);
        return state !== undefined && reruns(state);
      };
      // A call heard live while the stored calls are listed is newer than the listing: one this
      // process just started executing must not be taken for a leftover. Unless its first live rune
      // shows it was executing already (a progress update): that execution predates this process
      // (or is the re-run of a rerun-safe call, which is left alone).
      const heardLive = new Set<string>();
      const live = runes$.pipe(filter((rune) => rune.machine === toolCall.id && !heardLive.has(rune.stream))).subscribe((rune) => {
        heardLive.add(rune.stream);
        if (rune.from === 'executing' && rune.to === 'executing' && !rerunsInMemory(rune.stream)) interrupt(rune.stream);
      });
      // With `rerun`, each listed call's state is read to ask it: the epic completes after the last answer.
      let reading = 0;
      let listingDone = false;
      const completeIfDone = (): void => {
        if (!listingDone || reading > 0) return;
        live.unsubscribe();
        subscriber.complete();
      };
      const listing = context.streams({ machine: toolCall.id, values: ['executing'] }).subscribe({
        next: (head) => {
          if (heardLive.has(head.stream)) return;
          if (rerun === undefined) return interrupt(head.stream);
          reading++;
          context.snapshot<ToolCallState>(head.stream).then(
            (snapshot) => {
              const state = snapshot?.state;
              if (state?.value === 'executing' && !heardLive.has(head.stream) && !reruns(state)) interrupt(head.stream);
              reading--;
              completeIfDone();
            },
            (error: unknown) => subscriber.error(error),
          );
        },
        error: (error: unknown) => subscriber.error(error),
        complete: () => {
          listingDone = true;
          completeIfDone();
        },
      });
      return () => {
        live.unsubscribe();
        listing.unsubscribe();
      };
    });
  };
}
