import { ignoreElements, merge, tap } from 'rxjs';
import { toolCall } from '../../reducers/tool-call/machine.js';
import { durableDeadline } from '../../streams/durable-deadline.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic } from '../../streams/epic.js';
import type { EffectsByKey } from '../../streams/state-effects.js';
import { randomClaimId } from './claim-execution.js';
import type { AnyTool } from './tool.js';
import { execution$ } from './tool-call-execution.js';
import { callOrder, type CallOrder } from './tool-call-order.js';
import { policy$ } from './tool-call-policy.js';
import { toolRegistry, type ToolRegistry } from './tool-registry.js';
import type { ToolScope } from './tool-scope.js';

const isToolRegistry = (tools: unknown): tools is ToolRegistry => typeof (tools as ToolRegistry | undefined)?.resolve === 'function' && !Array.isArray(tools);

/** Options of {@link toolCallEffects}, with their defaults. */
export interface ToolCallEffectsOptions {
  /**
   * The tools calls may name (`defineTool`, `connectMcp`); names must be unique. Or a
   * `ToolRegistry` that tools are added to while calls run (`agentEpics` does so for the agent
   * definitions the registry makes live).
   */
  tools: readonly AnyTool[] | ToolRegistry;
  /** How long a call may wait for approval before it ends with `approval_timeout`, in scheduler ms. Default 600,000 (10 minutes). */
  approvalTimeoutMs?: number;
  /** How late an approval timeout may fire: the timer wheel's bucket size, in ms. Default 1,000. */
  resolutionMs?: number;
  /**
   * Tools whose calls another effect runs (the `delegate` tool's calls wait for a sub-agent): their
   * policy is decided here, their execution is left alone, and a restart does not interrupt them.
   * Default: none.
   */
  runElsewhere?: readonly string[];
  /**
   * Which tools each call may run (`agentEpics` gives each agent its role's): a call of a tool
   * outside it needs no approval and ends with `execution_error` giving the scope's reason; its
   * tool never runs. Default: every call may run every tool of `tools`.
   */
  scope?: ToolScope;
  /**
   * A new claim id for each run of a call, recorded by its `execution_claimed` before the tool
   * starts: unique across every process sharing the log, 1 to 128 characters. Default: a random UUID.
   */
  claimId?: () => string;
}

/**
 * The tool-call effects: drive every `tool-call` stream (seed 003's Tool Lifecycle) from its
 * `tool.call` to exactly one outcome, finding each call's tool by its `toolName`.
 *
 * 1. Policy: a new call gets `requires_approval{policyReason}` if its tool's `needsApproval(input)`
 *    says so, else `no_approval_needed`. A call naming an unknown tool, or whose arguments fail the
 *    tool's schema, needs no approval: it ends with `execution_error` naming the unknown tool (and
 *    the known ones) or each failing field, so the model gets a `tool.result` and the turn goes on.
 *    Order: within one tool round of an agent's turn, calls of `parallelSafe` tools are decided
 *    (and run) at once; any other call stays `pending_call` until every call before it in the
 *    round is terminal or parallel-safe, so unsafe calls run one at a time, in call order (see `CallOrder`).
 * 2. Execution: the rune that moves a call into `executing` runs its tool once, with a signal and
 *    a `progress` callback. Before the tool starts, the run claims the call durably
 *    (`execution_claimed{claim}`, a `tool.claimed` rune) and starts it only if that claim is the
 *    one recorded: of two runners (a failover), one starts it. Progress chunks are `progress_update` runes; the outcome is `success`
 *    (the output as JSON), `execution_error`, or `execution_timeout` after the tool's `timeoutMs`
 *    (the signal aborts). A `cancelled` call aborts the signal. `approved` itself starts the run:
 *    the approval dispatch is the continuation. Two approvals at once: the machine takes the
 *    first and refuses the second, so the tool runs once; a call already running is started again only by a takeover (4).
 * 3. Approval timeout: `awaiting_approval` for `approvalTimeoutMs` ends with `approval_timeout`.
 *    The deadline is the rune's `at` plus the timeout, so it survives restarts; the approval
 *    itself waits in the log.
 * 4. Restart: the three effects are a function of each call's state (see `stateEffects`), so the
 *    engine resumes them from the stored calls: a call still `pending_call` gets its policy
 *    decision, once its turn in its round comes; one `awaiting_approval` gets its clock back at its original deadline; one left
 *    `executing` unclaimed never started, so it is claimed and runs; one left claimed started
 *    somewhere: it runs again under a new claim (superseding the old one) if its tool is
 *    `rerunSafe`, and any other ends with "interrupted by restart" (see `executionStart`). That is
 *    `toolCallRecovery`'s job done here: do not add a `toolCallRecovery()` next to it (it would
 *    interrupt the runs).
 *
 * Every time comes from the engine's scheduler, so all of it runs under virtual time in tests.
 *
 * ## Example
 * ```ts
 * import { filter, firstValueFrom } from 'rxjs';
 * import { z } from 'zod';
 * import { createEngine } from 'runestream';
 * import { defineTool, toolCallEffects } from 'runestream/agents';
 * const add = defineTool({ name: 'add', description: 'Adds two numbers.', inputSchema: z.object({ a: z.number(), b: z.number() }), execute: ({ a, b }) => a + b });
 * const engine = createEngine({ epics: [toolCallEffects({ tools: [add] })] });
 * engine.runes$().subscribe((rune) => console.log(rune.kind, rune.to));
 * const result = firstValueFrom(engine.runes$().pipe(filter((rune) => rune.kind === 'tool.result')));
 * await engine.spawn('call-1', 'tool-call', { callId: 'c1', toolName: 'add', arguments: { a: 1, b: 2 } });
 * console.log((await result).event);
 * // Logs:
 * // tool.call pending_call
 * // no_approval_needed executing
 * // tool.claimed executing
 * // tool.result completed_result
 * // { type: 'success', output: 3 }
 * await engine.close();
 * ```
 *
 * @see defineTool, toolSpecs, connectMcp, toolCallRecovery
 */
export function toolCallEffects(options: ToolCallEffectsOptions): Epic {
  const { tools, approvalTimeoutMs = 600_000, resolutionMs = 1000, runElsewhere = [], scope, claimId = randomClaimId } = options ?? ({} as ToolCallEffectsOptions);
  const registry = isToolRegistry(tools) ? tools : toolRegistry('toolCallEffects', tools);
  if (!(approvalTimeoutMs > 0)) throw new TypeError(`toolCallEffects: "approvalTimeoutMs" must be positive, got ${String(approvalTimeoutMs)}`);
  if (!(resolutionMs > 0)) throw new TypeError(`toolCallEffects: "resolutionMs" must be positive, got ${String(resolutionMs)}`);
  if (typeof claimId !== 'function') throw new TypeError(`toolCallEffects: "claimId" must be a function giving a new claim id, got ${typeof claimId}`);
  const execution = { registry, runElsewhere: new Set(runElsewhere), scope, claimId };
  // A timeout whose rune did not come back (its dispatch failed) is sent again this much later.
  const retryMs = Math.min(approvalTimeoutMs, 60_000);
  const effects = (order: CallOrder): Epic =>
    stateEffects({
      name: 'toolCallEffects',
      machine: toolCall,
      states: ['pending_call', 'awaiting_approval', 'executing'],
      effects: (view, context): EffectsByKey<typeof toolCall> => {
        switch (view.value) {
          case 'pending_call':
            return { policy: policy$(view, context, registry, order, scope) };
          case 'awaiting_approval':
            // Nothing loops in awaiting_approval: the view's `at` is the rune that entered it, stored or live.
            return {
              approvalTimeout: durableDeadline(view.at + approvalTimeoutMs, { type: 'approval_timeout' as const }, { scheduler: context.scheduler, resolutionMs, retryMs }),
            };
          case 'executing':
            return { run: execution$(view, context, execution) };
          default:
            return {};
        }
      },
    });
  // One order per run of the epic: the calls waiting their turn hear the live runes of the calls before them.
  return function toolCallEffects(runes$, context, deps) {
    const order = callOrder(registry, context);
    return merge(
      runes$.pipe(
        tap((rune) => order.heard(rune)),
        ignoreElements(),
      ),
      effects(order)(runes$, context, deps),
    );
  };
}
