import { EMPTY, Observable, catchError, map, mergeMap, of } from 'rxjs';
import type { ToolCallEvent, ToolCallInput } from '../../reducers/tool-call/schema.js';
import type { toolCall } from '../../reducers/tool-call/machine.js';
import { SPAWN_EVENT_TYPE } from '../../reducers/rune.js';
import type { EpicContext } from '../../streams/epic.js';
import type { StreamView } from '../../streams/state-effects.js';
import { errorText } from '../../reducers/error-text.js';
import type { CallOrder } from './tool-call-order.js';
import type { ToolRegistry } from './tool-registry.js';
import type { ToolScope } from './tool-scope.js';

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
 * import { defineTool } from 'runestream/agents';
 * import { approvalDecision } from './tool-call-policy.js';
 * import { toolRegistry } from './tool-registry.js';
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

/**
 * The policy effect of a call in `pending_call`: its {@link approvalDecision}, once the call may
 * start (`order.mayStart$`: an unsafe call waits, pending, for the unsafe calls before it in its
 * round). A live spawn rune carries the call, so a call that need not wait is decided in the
 * rune's own tick; a call found pending after a restart (its decision died with the process, or
 * it was waiting its turn) is read first, and one whose state cannot be read stays pending until
 * the next start. A call outside its caller's `scope` needs no approval (nobody should be asked
 * to approve a call that will not run) and goes on at once to end with an error.
 */
export function policy$(view: StreamView<typeof toolCall>, context: EpicContext, registry: ToolRegistry, order: CallOrder, scope?: ToolScope): Observable<ToolCallEvent> {
  const { rune } = view;
  const call$: Observable<ToolCallInput> =
    rune?.event.type === SPAWN_EVENT_TYPE
      ? of(rune.event.input)
      : view.state$.pipe(
          mergeMap((state) => (state?.value === 'pending_call' ? [state] : [])),
          catchError(() => EMPTY),
        );
  const decide = (call: ToolCallInput): Observable<ToolCallEvent> => order.mayStart$(view.stream, call).pipe(map(() => approvalDecision(registry, call)));
  if (scope === undefined) return call$.pipe(mergeMap(decide));
  return call$.pipe(
    mergeMap((call) =>
      scope(view.stream, call.toolName, context).pipe(mergeMap((refused) => (refused === undefined ? decide(call) : of<ToolCallEvent>({ type: 'no_approval_needed' })))),
    ),
  );
}
