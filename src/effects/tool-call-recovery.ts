import { EMPTY, map } from 'rxjs';
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
  return function toolCallRecovery(_runes$, context) {
    if (listed) return EMPTY;
    listed = true;
    return context
      .streams({ machine: toolCall.id, values: ['executing'] })
      .pipe(map((head): EpicCommand => ({ stream: head.stream, event: { type: 'execution_error', error: INTERRUPTED_BY_RESTART } })));
  };
}
