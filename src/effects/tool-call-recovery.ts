import { map } from 'rxjs';
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
 * Exactly one: the result is a dispatch like any other, so if the process dies before it is
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
  return function toolCallRecovery(_runes$, context) {
    return context
      .streams({ machine: toolCall.id, values: ['executing'] })
      .pipe(map((head): EpicCommand => ({ stream: head.stream, event: { type: 'execution_error', error: INTERRUPTED_BY_RESTART } })));
  };
}
