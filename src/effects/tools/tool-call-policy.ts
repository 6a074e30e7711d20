import { EMPTY, Observable, catchError, merge, mergeMap } from 'rxjs';
import type { ToolCallEvent, ToolCallInput } from '../../reducers/tool-call/schema.js';
import type { toolCall } from '../../reducers/tool-call/machine.js';
import { SPAWN_EVENT_TYPE, type RuneOf } from '../../reducers/rune.js';
import type { EpicCommand, EpicContext } from '../../streams/epic.js';
import { errorText } from '../../reducers/error-text.js';
import { callState$, storedCalls } from './stored-calls.js';
import type { ToolRegistry } from './tool-registry.js';

/**
 * The approval policy's decision for a new call: `requires_approval{policyReason}` when its tool's
 * `needsApproval(input)` says so, else `no_approval_needed`.
 *
 * A call that cannot run (an unknown tool, arguments that fail the schema) needs no approval: it
 * goes straight to `executing`, where it ends with an `execution_error` that tells the model what
 * was wrong, so the turn goes on. A `needsApproval` that throws asks for approval, saying why:
 * when the policy cannot decide, a person does.
 *
 * @example
 * ```ts
 * import { z } from 'zod';
 * import { approvalDecision, defineTool, toolRegistry } from 'runestream';
 * const rm = defineTool({ name: 'rm', description: 'Removes a file.', inputSchema: z.object({ path: z.string() }), needsApproval: true, execute: () => 'removed' });
 * const registry = toolRegistry('example', [rm]);
 * console.log(approvalDecision(registry, { toolName: 'rm', arguments: { path: '/tmp/x' } }));
 * // Logs: { type: 'requires_approval', policyReason: 'tool "rm" requires approval' }
 * ```
 */
export function approvalDecision(registry: ToolRegistry, call: Pick<ToolCallInput, 'toolName' | 'arguments'>): ToolCallEvent {
  const resolved = registry.resolve(call);
  if (!resolved.ok) return { type: 'no_approval_needed' };
  const { tool, input } = resolved;
  try {
    return tool.needsApproval(input) ? { type: 'requires_approval', policyReason: `tool "${tool.name}" requires approval` } : { type: 'no_approval_needed' };
  } catch (error) {
    return { type: 'requires_approval', policyReason: `the approval policy of tool "${tool.name}" failed: ${errorText(error)}` };
  }
}

/** Options of {@link toolCallPolicy}. */
export interface ToolCallPolicyOptions {
  readonly registry: ToolRegistry;
  /** List the stored calls still `pending_call` (their decision died with a process) and decide them too. */
  readonly resume: boolean;
}

/**
 * The policy step of the tool-call effects: every call's spawn rune (`tool.call`, state
 * `pending_call`) gets {@link approvalDecision}. With `resume`, so does every stored call still
 * `pending_call` when it starts (spawned, then the process died before the decision was durable).
 *
 * @param calls$ the live runes of `tool-call` streams.
 */
export function toolCallPolicy(calls$: Observable<RuneOf<typeof toolCall>>, context: EpicContext, options: ToolCallPolicyOptions): Observable<EpicCommand> {
  const { registry, resume } = options;
  const spawned$ = calls$.pipe(
    mergeMap(({ stream, event, to }): EpicCommand[] =>
      event.type === SPAWN_EVENT_TYPE && to === 'pending_call' ? [{ stream, event: approvalDecision(registry, event.input) }] : [],
    ),
  );
  const stored$ = resume
    ? storedCalls(calls$, context, ['pending_call']).pipe(
        mergeMap((head) =>
          callState$(context, head.stream).pipe(
            mergeMap((state) => (state?.value === 'pending_call' ? [{ stream: head.stream, event: approvalDecision(registry, state) }] : EMPTY)),
            // Its state could not be read: it stays pending until the next start lists it again.
            catchError(() => EMPTY),
          ),
        ),
      )
    : EMPTY;
  return merge(spawned$, stored$);
}
