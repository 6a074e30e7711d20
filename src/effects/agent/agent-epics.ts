import type { LanguageModel } from 'ai';
import type { Budget, PriceTable } from '../../reducers/budget.js';
import type { Epic } from '../../streams/epic.js';
import type { ProviderChain } from '../llm/provider-chain.js';
import { providerBreakers } from '../llm/provider-breakers.js';
import { toolCallEffects } from '../tools/tool-call-effects.js';
import type { AnyTool } from '../tools/tool.js';
import { agentBudgets, type BudgetLimits } from './agent-budgets.js';
import { agentModel, deltaFlushMsOf } from './agent-model.js';
import type { AgentAdmission } from './agent-companions.js';
import type { AgentProfile } from './agent-profile.js';
import type { AgentProfiles } from './agent-profiles.js';
import { agentRoles } from './agent-roles.js';
import { agentTurns } from './agent-turns.js';
import { conversationClose } from './conversation-close.js';
import { conversationErrors, errorThresholdOf } from './conversation-errors.js';
import { DELEGATE_TOOL, delegation, type DelegationLimits } from './delegation.js';

/** Options of {@link agentEpics}. */
export interface AgentEpicsOptions {
  /** One model (a chain of one provider, named `"model"`), or a provider chain with fallback. */
  readonly model: LanguageModel | ProviderChain;
  /** The tools every agent may call. Default: none. */
  readonly tools?: readonly AnyTool[];
  /** The system prompt of every agent. Default: none. */
  readonly system?: string;
  /** How long a tool call may wait for approval. Default 600,000 ms (10 minutes). */
  readonly approvalTimeoutMs?: number;
  /**
   * The roles agents may have, by name: an agent's role is the `role` of its lifecycle's spawn
   * input, and its profile gives its model, tools and system prompt (each defaulting to the
   * options above). An agent whose role has no profile fails init (`init_error`). With roles,
   * every agent is offered the `delegate` tool: it hands a task to a sub-agent of a role in the
   * same conversation, and returns its final output. An agent runs only its role's tools (and
   * `delegate`): a call naming any other tool ends with an error result naming the tool and the
   * role. Default: none (no roles, no delegation).
   *
   * Or an {@link AgentProfiles} (`agentProfiles`), whose roles may be added while the engine runs
   * (the agent registry's definitions): its fixed roles are the delegation's, and the breakers of
   * every chain of its toolkit run.
   */
  readonly agents?: Readonly<Record<string, AgentProfile>> | AgentProfiles;
  /** Limits on delegation per conversation: `maxDepth` (default 2), `maxAgents` (default 16). */
  readonly delegation?: DelegationLimits;
  /** Limits on each agent's usage (see `agentBudgets`). Default: none. */
  readonly budget?: Budget;
  /** Limits on each conversation's usage, all its agents together (see `agentBudgets`). Default: none. */
  readonly conversationBudget?: Budget;
  /**
   * How many turns of a conversation may end in error in a row before it is suspended (seed 003's
   * `error_threshold`; see `conversationErrors`): an integer from 1 to 1,000, else an
   * `InvalidOptionError` (code `invalid_option`). Default 5.
   */
  readonly errorThreshold?: number;
  /** Prices per model id, for the `cost` of each response and the `cost` dimension of budgets. Default: none. */
  readonly prices?: PriceTable;
  /**
   * How often a model's streamed text is appended: the first delta of a response at once, then at
   * most one `turn.assistant_delta` per `deltaFlushMs` carrying the text that came meanwhile (see
   * `agentModel`). An integer from 0 (a rune per delta) to 10,000, else an `InvalidOptionError`
   * (code `invalid_option`). Default 50.
   */
  readonly deltaFlushMs?: number;
  /**
   * Whether an agent of a role may start now: with the agent registry, `registeredAgentAdmission`
   * lets only agents whose registration is ACTIVE start; any other gets `init_error` saying why,
   * and its turns are interrupted. Default: none (every agent starts).
   */
  readonly admission?: AgentAdmission;
  /**
   * A new claim id for each tool run and delegation: unique across the processes sharing a log.
   * Default: a random UUID. The simulation draws them from its seed, so a run replays exactly.
   */
  readonly claimId?: () => string;
}

/**
 * Every epic an engine needs to run agents (seeds 002–004): the model's answers (`agentModel`,
 * through the provider chain and its breakers), the turns (`agentTurns`), their budgets (`agentBudgets`), the tool calls
 * (`toolCallEffects`: approval, execution, timeouts, and their crash recovery). Pass them to
 * `createEngine({ epics })`; then spawning `<root>/agent/<a>/turn` (machine `turn-engine`; see `agentStreams`) is an agent.
 *
 * ## Example
 * ```ts
 * import { filter, firstValueFrom } from 'rxjs';
 * import { z } from 'zod';
 * import { createEngine, type TurnEngineState } from 'runestream';
 * import { agentEpics, defineTool, scriptedModel } from 'runestream/agents';
 *
 * const clock = defineTool({ name: 'clock', description: 'The time now.', inputSchema: z.object({}), execute: () => '12:00' });
 * // Offline: a scripted model asks for the clock, then answers with what it said.
 * const model = scriptedModel([{ toolCalls: [{ toolName: 'clock', input: {} }] }, { text: 'It is 12:00.' }]);
 * const engine = createEngine({ epics: agentEpics({ model, tools: [clock] }) });
 * await engine.spawn('conv/c1/agent/a1/turn', 'turn-engine');
 * const answered = firstValueFrom(engine.state$<TurnEngineState>('conv/c1/agent/a1/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
 * await engine.dispatch('conv/c1/agent/a1/turn', { type: 'start_turn', input: 'What time is it?' });
 * console.log((await answered).output);
 * // Logs: It is 12:00.
 * await engine.close();
 * ```
 */
export function agentEpics(options: AgentEpicsOptions): Epic[] {
  const {
    model,
    tools = [],
    system,
    approvalTimeoutMs,
    agents,
    delegation: delegationLimits,
    budget,
    conversationBudget,
    errorThreshold,
    prices,
    deltaFlushMs,
    admission,
    claimId,
  } = options;
  const threshold = errorThresholdOf(errorThreshold, 'agentEpics');
  const flushMs = deltaFlushMsOf(deltaFlushMs, 'agentEpics');
  const roles = agentRoles({ model, tools, system, prices, agents });
  const limits: BudgetLimits = {
    ...(budget === undefined ? {} : { budget }),
    ...(conversationBudget === undefined ? {} : { conversationBudget }),
    ...(roles.any ? { budgetsByRole: roles.budgetOf } : {}),
  };
  return [
    agentModel(roles.any ? roles.chooseModel : roles.defaults, limits, { deltaFlushMs: flushMs, afterAssignment: true }),
    agentTurns({ ...limits, ...(roles.any ? { initError: roles.initError } : {}), ...(admission === undefined ? {} : { admission }) }),
    agentBudgets(limits),
    toolCallEffects({
      tools: roles.tools,
      ...(approvalTimeoutMs === undefined ? {} : { approvalTimeoutMs }),
      ...(roles.any ? { scope: roles.scope } : {}),
      ...(roles.delegation ? { runElsewhere: [DELEGATE_TOOL] } : {}),
      ...(claimId === undefined ? {} : { claimId }),
    }),
    ...roles.chains.map((each) => providerBreakers(each)),
    conversationClose(),
    conversationErrors({ errorThreshold: threshold }),
    ...(roles.delegation ? [delegation({ roles: roles.modelNames, ...delegationLimits, ...(claimId === undefined ? {} : { claimId }) })] : []),
  ];
}
