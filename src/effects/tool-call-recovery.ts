import { EMPTY, Observable, filter, map, mergeMap, of } from 'rxjs';
import { toolCall } from '../reducers/tool-call/machine.js';
import type { ToolCallInput } from '../reducers/tool-call/schema.js';
import type { Epic, EpicCommand } from '../streams/epic.js';
import { ofMachine } from '../streams/of-machine.js';
import { storedHeads } from './stored-heads.js';

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
 * It lists the stored calls once per engine, at its first subscription ({@link storedHeads}: a
 * listing that fails is tried again, and a call heard live meanwhile is decided from its own rune,
 * so a call this process runs is never taken for a leftover). Exactly one result: the result is a dispatch like any other, so if the process dies before it is
 * durable the next start sends it again, and once it is durable the call is terminal and a second
 * one would be refused.
 *
 * ## Example
 * ```ts
 * import { mkdtempSync, rmSync } from 'node:fs';
 * import { tmpdir } from 'node:os';
 * import { join } from 'node:path';
 * import { createEngine, sqliteStore, toolCallRecovery } from 'runestream';
 * const dir = mkdtempSync(join(tmpdir(), 'runestream-'));
 * const engine = createEngine({ store: sqliteStore(join(dir, 'agents.db')), epics: [toolCallRecovery()] });
 * await engine.close();
 * rmSync(dir, { recursive: true });
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
    const interrupt = (stream: string): EpicCommand => ({ stream, event: { type: 'execution_error', error: INTERRUPTED_BY_RESTART } });
    /** Whether a call in memory is one that something runs again. */
    const rerunsInMemory = (stream: string): boolean => {
      const state = rerun === undefined ? undefined : context.state(stream, toolCall);
      return state !== undefined && reruns(state);
    };
    return new Observable<EpicCommand>((subscriber) => {
      const calls$ = runes$.pipe(ofMachine(toolCall));
      return storedHeads(calls$, context, { machine: toolCall.id, values: ['executing'] }, {
        // A call heard live during the listing is newer than the listing: one this process just
        // started executing is no leftover. Unless its first live rune shows it executing already (a
        // progress update): that execution predates this process (or is a rerun-safe call's re-run).
        firstLive: (rune) => {
          if (rune.from === 'executing' && rune.to === 'executing' && !rerunsInMemory(rune.stream)) subscriber.next(interrupt(rune.stream));
        },
      })
        .pipe(
          // With `rerun`, each listed call's state is read to ask it.
          mergeMap((head) =>
            rerun === undefined
              ? of(head.stream)
              : context.snapshot(head.stream, toolCall).pipe(
                  filter((snapshot) => snapshot?.state.value === 'executing' && !reruns(snapshot.state)),
                  map(() => head.stream),
                ),
          ),
        )
        .subscribe({ next: (stream) => subscriber.next(interrupt(stream)), error: (error: unknown) => subscriber.error(error), complete: () => subscriber.complete() });
    });
  };
}
