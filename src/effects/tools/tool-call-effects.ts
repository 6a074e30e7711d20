import { merge } from 'rxjs';
import { toolCall } from '../../reducers/tool-call/machine.js';
import type { Epic } from '../../streams/epic.js';
import { ofMachine } from '../../streams/of-machine.js';
import type { AnyTool } from './tool.js';
import { toolApprovalTimeout } from './tool-approval-timeout.js';
import { toolCallExecution } from './tool-call-execution.js';
import { toolCallPolicy } from './tool-call-policy.js';
import { toolRegistry } from './tool-registry.js';

/** Options of {@link toolCallEffects}, with their defaults. */
export interface ToolCallEffectsOptions {
  /** The tools calls may name (`defineTool`, `connectMcp`); names must be unique. */
  tools: readonly AnyTool[];
  /** How long a call may wait for approval before it ends with `approval_timeout`, in scheduler ms. Default 600,000 (10 minutes). */
  approvalTimeoutMs?: number;
  /** How late an approval timeout may fire: the timer wheel's bucket size, in ms. Default 1,000. */
  resolutionMs?: number;
}

/**
 * The tool-call effects: drive every `tool-call` stream (seed 003's Tool Lifecycle) from its
 * `tool.call` to exactly one outcome, finding each call's tool by its `toolName`.
 *
 * 1. Policy: a new call gets `requires_approval{policyReason}` if its tool's `needsApproval(input)`
 *    says so, else `no_approval_needed`. A call naming an unknown tool, or whose arguments fail the
 *    tool's schema, needs no approval: it ends with `execution_error` naming the unknown tool (and
 *    the known ones) or each failing field, so the model gets a `tool.result` and the turn goes on.
 * 2. Execution: the rune that moves a call into `executing` runs its tool once, with a signal and
 *    a `progress` callback: progress chunks are `progress_update` runes; the outcome is `success`
 *    (the output as JSON), `execution_error`, or `execution_timeout` after the tool's `timeoutMs`
 *    (the signal aborts). A `cancelled` call aborts the signal. `approved` itself starts the run:
 *    the approval dispatch is the continuation. Two approvals at once: the machine takes the
 *    first and refuses the second, so the tool runs once; nothing else starts a running call again.
 * 3. Approval timeout: `awaiting_approval` for `approvalTimeoutMs` ends with `approval_timeout`.
 *    The deadline is the rune's `at` plus the timeout, so it survives restarts; the approval
 *    itself waits in the log.
 * 4. Restart (once per engine, at the first subscription): stored calls still `pending_call` get
 *    their policy decision; calls `awaiting_approval` get their clocks back; calls left
 *    `executing` by the crash run again if their tool is `rerunSafe`, and all others end with
 *    "interrupted by restart". That is `toolCallRecovery`'s job done here, in the same listing:
 *    do not add a `toolCallRecovery()` next to it (it would interrupt the re-runs). A listing that
 *    fails is retried (after 1 s, doubling to 30 s) without disturbing the calls running meanwhile.
 *
 * Every time comes from the engine's scheduler, so all of it runs under virtual time in tests.
 * One instance per engine: it keeps which calls it is running.
 *
 * ## Example
 * ```ts
 * import { filter, firstValueFrom } from 'rxjs';
 * import { z } from 'zod';
 * import { createEngine, defineTool, toolCallEffects } from 'runestream';
 * const add = defineTool({ name: 'add', description: 'Adds two numbers.', inputSchema: z.object({ a: z.number(), b: z.number() }), execute: ({ a, b }) => a + b });
 * const engine = createEngine({ epics: [toolCallEffects({ tools: [add] })] });
 * engine.runes$().subscribe((rune) => console.log(rune.kind, rune.to));
 * const result = firstValueFrom(engine.runes$().pipe(filter((rune) => rune.kind === 'tool.result')));
 * await engine.spawn('call-1', 'tool-call', { callId: 'c1', toolName: 'add', arguments: { a: 1, b: 2 } });
 * console.log((await result).event);
 * // Logs:
 * // tool.call pending_call
 * // no_approval_needed executing
 * // tool.result completed_result
 * // { type: 'success', output: 3 }
 * await engine.close();
 * ```
 *
 * @see defineTool, toolSpecs, connectMcp, toolCallRecovery
 */
export function toolCallEffects(options: ToolCallEffectsOptions): Epic {
  const { tools, approvalTimeoutMs = 600_000, resolutionMs = 1000 } = options ?? ({} as ToolCallEffectsOptions);
  const registry = toolRegistry('toolCallEffects', tools);
  if (!(approvalTimeoutMs > 0)) throw new TypeError(`toolCallEffects: "approvalTimeoutMs" must be positive, got ${String(approvalTimeoutMs)}`);
  if (!(resolutionMs > 0)) throw new TypeError(`toolCallEffects: "resolutionMs" must be positive, got ${String(resolutionMs)}`);
  const owned = new Set<string>();
  // The stored calls are resumed once per engine: a resubscription after a failure would find
  // this process's own calls and take them for leftovers of a crash.
  let resumed = false;
  return function toolCallEffects(runes$, context) {
    const resume = !resumed;
    resumed = true;
    const calls$ = runes$.pipe(ofMachine(toolCall));
    return merge(
      toolCallPolicy(calls$, context, { registry, resume }),
      toolCallExecution(calls$, context, { registry, owned, resume }),
      toolApprovalTimeout(calls$, context, { approvalTimeoutMs, resolutionMs, resume }),
    );
  };
}
