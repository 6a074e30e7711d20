import { filter, map, of } from 'rxjs';
import { toolCall } from '../reducers/tool-call/machine.js';
import type { ToolCallInput } from '../reducers/tool-call/schema.js';
import { stateEffects } from '../streams/effect-host.js';
import type { Epic } from '../streams/epic.js';
import type { EffectOrigin, EffectsByKey } from '../streams/state-effects.js';

/** The error a tool call interrupted by a restart ends with. */
export const INTERRUPTED_BY_RESTART = 'interrupted by restart';

/**
 * What the runner of a call in `executing` does with it: claim it and run its tool (a re-run names
 * the claim it `supersedes`), end it with "interrupted by restart", or leave it to its claimant.
 */
export type ExecutionStart = { readonly action: 'claim'; readonly supersedes?: string } | { readonly action: 'interrupt' } | { readonly action: 'leave' };

/**
 * The one rule for a tool call in flight (a tool-call machine's call in `executing`, a ReAct agent's
 * own call without a result, a delegated call), from its recorded claim and how its runner came to it:
 *
 * 1. Not claimed: its tool never started (a process that dies before its claim is durable never
 *    started it): claim it and run it, whether heard live or taken over.
 * 2. Claimed, heard live: another runner's claim came first and that runner has it: leave it.
 * 3. Claimed, taken over (`resumed`: after a restart, or on gaining the stream's lease): it started
 *    and its run died with its process. A `rerunSafe` call is claimed again, superseding that claim
 *    (two survivors name the same claim, so the machine takes only the first); any other ends
 *    with "interrupted by restart".
 */
export function executionStart(state: { readonly claim?: string | undefined }, origin: EffectOrigin, rerunSafe: boolean): ExecutionStart {
  if (state.claim === undefined) return { action: 'claim' };
  if (origin === 'live') return { action: 'leave' };
  return rerunSafe ? { action: 'claim', supersedes: state.claim } : { action: 'interrupt' };
}

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
 * which `rerun(call)` is true are left to whatever runs them again. It is for runners that do not
 * claim their calls (`toolCallEffects` claims them and decides this itself, see `executionStart`),
 * so it takes every call it finds executing for started.
 *
 * Its one effect is a function of each call's state (see `stateEffects`): the engine resumes it for
 * every stored call left `executing` (and for a call first heard by a rune that leaves it executing,
 * a progress update from a run older than this process), never for a call this process started
 * executing. Exactly one result: the result is a dispatch like any other, so if the process dies before it is
 * durable the next start sends it again, and once it is durable the call is terminal and a second
 * one would be refused.
 *
 * ## Example
 * ```ts
 * import { mkdtempSync, rmSync } from 'node:fs';
 * import { tmpdir } from 'node:os';
 * import { join } from 'node:path';
 * import { createEngine, toolCallRecovery } from 'runestream';
 * import { sqliteStore } from 'runestream/sqlite';
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
  const interrupted = { type: 'execution_error' as const, error: INTERRUPTED_BY_RESTART };
  return stateEffects({
    name: 'toolCallRecovery',
    machine: toolCall,
    states: ['executing'],
    // A call this process moved into executing is running here; only one it took over was left by a crash.
    effects: (view): EffectsByKey<typeof toolCall> =>
      view.origin !== 'resumed'
        ? {}
        : {
            interrupt:
              rerun === undefined
                ? of(interrupted)
                : view.state$.pipe(
                    filter((state) => state?.value === 'executing' && !reruns(state)),
                    map(() => interrupted),
                  ),
          },
  });
}
