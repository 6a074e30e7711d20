import type { LanguageModel } from 'ai';
import type { Epic } from '../../streams/epic.js';
import { chainCall$, type ProviderChain } from '../llm/provider-chain.js';
import { providerBreakers } from '../llm/provider-breakers.js';
import { toolCallEffects } from '../tools/tool-call-effects.js';
import type { AnyTool } from '../tools/tool.js';
import type { ToolScope } from '../tools/tool-scope.js';
import { toolSpecs } from '../tools/tool-specs.js';
import { map, of } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import type { AgentLifecycleState } from '../../reducers/agent-lifecycle/schema.js';
import { agentModel, type AgentModelChooser, type AgentModelOptions } from './agent-model.js';
import type { AgentProfile } from './agent-profile.js';
import { conversationClose } from './conversation-close.js';
import { DELEGATE_TOOL, delegateTool, delegation, type DelegationLimits } from './delegation.js';
import { agentOfCall, agentOfTurn } from './streams.js';
import { agentTurns } from './agent-turns.js';
import { agentBudgets, type BudgetLimits } from './agent-budgets.js';
import type { Budget, PriceTable } from '../../reducers/budget.js';

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
   */
  readonly agents?: Readonly<Record<string, AgentProfile>>;
  /** Limits on delegation per conversation: `maxDepth` (default 2), `maxAgents` (default 16). */
  readonly delegation?: DelegationLimits;
  /** Limits on each agent's usage (see `agentBudgets`). Default: none. */
  readonly budget?: Budget;
  /** Limits on each conversation's usage, all its agents together (see `agentBudgets`). Default: none. */
  readonly conversationBudget?: Budget;
  /** Prices per model id, for the `cost` of each response and the `cost` dimension of budgets. Default: none. */
  readonly prices?: PriceTable;
}

const isChain = (model: LanguageModel | ProviderChain): model is ProviderChain =>
  typeof model === 'object' && model !== null && Array.isArray((model as ProviderChain).providers);

/** A model as a provider chain: a chain as it is, one model as a chain of one provider named `"model"`. */
export const chainOf = (model: LanguageModel | ProviderChain): ProviderChain => (isChain(model) ? model : { providers: [{ name: 'model', model }] });

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
  const { model, tools = [], system, approvalTimeoutMs, agents, delegation: delegationLimits, budget, conversationBudget, prices } = options;
  const chain = chainOf(model);
  const roles = agents === undefined || Object.keys(agents).length === 0 ? undefined : agents;
  const delegate = roles === undefined ? [] : [delegateTool(roles)];
  const modelOf = (chosen: ProviderChain, chosenTools: readonly AnyTool[], chosenSystem: string | undefined): AgentModelOptions => ({
    call: (request, context) => chainCall$(chosen, request, context),
    tools: toolSpecs([...chosenTools, ...delegate]),
    ...(chosenSystem === undefined ? {} : { system: chosenSystem }),
    ...(prices === undefined ? {} : { prices }),
  });
  const defaults = modelOf(chain, tools, system);
  const chains = [chain];
  const profiles = new Map<string, AgentModelOptions>();
  for (const [role, profile] of Object.entries(roles ?? {})) {
    const profileChain = profile.model === undefined ? chain : chainOf(profile.model);
    // One breaker epic per provider name: the breakers are streams named by provider.
    const named = new Set(chains.flatMap((each) => each.providers.map((provider) => provider.name)));
    if (profileChain.providers.some((provider) => !named.has(provider.name))) chains.push(profileChain);
    profiles.set(role, modelOf(profileChain, profile.tools ?? tools, profile.system ?? system));
  }
  // Every tool any agent may call; a name two profiles share must be the same tool.
  const allTools = new Map<string, AnyTool>();
  for (const tool of [...tools, ...Object.values(roles ?? {}).flatMap((profile) => profile.tools ?? []), ...delegate]) {
    const known = allTools.get(tool.name);
    if (known !== undefined && known !== tool) throw new TypeError(`agentEpics: two different tools are named "${tool.name}"; tool names must be unique`);
    allTools.set(tool.name, tool);
  }
  const roleOf = (lifecycle: AgentLifecycleState | undefined): string | undefined => lifecycle?.role;
  const noProfile = (role: string): string => `no agent profile for role "${role}"; the roles are ${[...profiles.keys()].join(', ')}`;
  // Each role's tool names, and those of an agent without a role: a model sees only its own, and
  // a call naming another role's tool is refused rather than run from the shared registry.
  const namesOf = (chosenTools: readonly AnyTool[]): ReadonlySet<string> => new Set([...chosenTools, ...delegate].map((tool) => tool.name));
  const defaultNames = namesOf(tools);
  const roleNames = new Map(Object.entries(roles ?? {}).map(([role, profile]) => [role, namesOf(profile.tools ?? tools)]));
  const scope: ToolScope = (stream, toolName, context) => {
    const agent = agentOfCall(stream);
    if (agent === undefined) return of(undefined);
    return context.snapshot(agent.lifecycle, agentLifecycle).pipe(
      map((lifecycle) => {
        const role = roleOf(lifecycle?.state);
        const names = role === undefined ? defaultNames : roleNames.get(role);
        if (names === undefined) return noProfile(role!);
        if (names.has(toolName)) return undefined;
        const known = names.size === 0 ? 'none' : [...names].map((name) => `"${name}"`).join(', ');
        return `tool "${toolName}" is not a tool of ${role === undefined ? 'this agent (it has no role)' : `role "${role}"`}; its tools are: ${known}`;
      }),
    );
  };
  const chooseModel: AgentModelChooser = (turn, context) =>
    context.snapshot(agentOfTurn(turn)!.lifecycle, agentLifecycle).pipe(
      map((lifecycle) => {
        const role = roleOf(lifecycle?.state);
        if (role === undefined) return defaults;
        const profile = profiles.get(role);
        if (profile === undefined) throw new Error(noProfile(role));
        return profile;
      }),
    );
  const budgetsByRole = Object.fromEntries(Object.entries(roles ?? {}).flatMap(([role, profile]) => (profile.budget === undefined ? [] : [[role, profile.budget]])));
  const limits: BudgetLimits = {
    ...(budget === undefined ? {} : { budget }),
    ...(conversationBudget === undefined ? {} : { conversationBudget }),
    ...(Object.keys(budgetsByRole).length === 0 ? {} : { budgetsByRole }),
  };
  return [
    agentModel(roles === undefined ? defaults : chooseModel),
    agentTurns({
      ...limits,
      ...(roles === undefined ? {} : { initError: (lifecycle) => (lifecycle.role === undefined || profiles.has(lifecycle.role) ? undefined : noProfile(lifecycle.role)) }),
    }),
    agentBudgets(limits),
    toolCallEffects({
      tools: [...allTools.values()],
      ...(approvalTimeoutMs === undefined ? {} : { approvalTimeoutMs }),
      ...(roles === undefined ? {} : { runElsewhere: [DELEGATE_TOOL], scope }),
    }),
    ...chains.map((each) => providerBreakers(each)),
    conversationClose(),
    ...(roles === undefined
      ? []
      : [delegation({ roles: Object.fromEntries(Object.entries(roles).map(([role, profile]) => [role, modelName(profile.model ?? model)])), ...delegationLimits })]),
  ];
}

/** The name of a model for an `agent.spawning` rune: its model id, or its chain's first provider's. */
function modelName(model: LanguageModel | ProviderChain): { model?: string } {
  const first = isChain(model) ? model.providers[0]?.model : model;
  const id = typeof first === 'string' ? first : (first as { modelId?: unknown } | undefined)?.modelId;
  return typeof id === 'string' && id.length > 0 ? { model: id } : {};
}
