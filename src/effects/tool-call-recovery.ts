import { EMPTY, Observable, filter } from 'rxjs';
import { toolCall } from '../reducers/tool-call/machine.js';
import type { Epic, EpicCommand } from '../streams/epic.js';

/** The error a tool call interrupted by a restart ends with. */
export const INTERRUPTED_BY_RESTART = 'interrupted by restart';

/**
 * Ends every tool call that was `executing` when the engine last stopped: when the epic starts, each
 * such call gets `execution_error` with "interrupted by restart", so it has exactly one
 * `tool.result` (INV-TOOL-TERMINAL) and the next model call never sees an orphan tool call. Its
 * execution died with the process; whether to run it again is the caller's decision.
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
export function toolCallRecovery(): Epic {
  // Once per engine: a resubscription after a failure would find this process's own calls
  // executing and take them for leftovers of a crash.
  let listed = false;
  return function toolCallRecovery(runes$, context) {
    if (listed) return EMPTY;
    listed = true;
    return new Observable<EpicCommand>((subscriber) => {
      const interrupt = (stream: string): void => subscriber.next({ stream, event: { type: 'execution_error', error: INTERRUPTED_BY_RESTART } });
      // A call heard live while the stored calls are listed is newer than the listing: one this
      // process just started executing must not be taken for a leftover. Unless its first live rune
      // shows it was executing already (a progress update): that execution predates this process.
      const heardLive = new Set<string>();
      const live = runes$.pipe(filter((rune) => rune.machine === toolCall.id && !heardLive.has(rune.stream))).subscribe((rune) => {
        heardLive.add(rune.stream);
        if (rune.from === 'executing' && rune.to === 'executing') interrupt(rune.stream);
      });
      const listing = context.streams({ machine: toolCall.id, values: ['executing'] }).subscribe({
        next: (head) => {
          if (!heardLive.has(head.stream)) interrupt(head.stream);
        },
        error: (error: unknown) => subscriber.error(error),
        complete: () => {
          live.unsubscribe();
          subscriber.complete();
        },
      });
      return () => {
        live.unsubscribe();
        listing.unsubscribe();
      };
    });
  };
}
