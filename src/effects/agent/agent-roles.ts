import type { LanguageModel } from 'ai';
import { map, of } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import type { AgentLifecycleState } from '../../reducers/agent-lifecycle/schema.js';
import type { Budget, PriceTable } from '../../reducers/budget.js';
import { chainCall$, type ProviderChain } from '../llm/provider-chain.js';
import type { AnyTool } from '../tools/tool.js';
import type { ToolRegistry } from '../tools/tool-registry.js';
import type { ToolScope } from '../tools/tool-scope.js';
import { toolSpecs } from '../tools/tool-specs.js';
import type { AgentModelChooser, AgentModelOptions } from './agent-model.js';
import type { AgentProfile } from './agent-profile.js';
import { agentProfiles, isAgentProfiles, type AgentProfiles } from './agent-profiles.js';
import { delegateTool } from './delegation.js';
import { agentOfCall, agentOfTurn } from './streams.js';

const isChain = (model: LanguageModel | ProviderChain): model is ProviderChain =>
  typeof model === 'object' && model !== null && Array.isArray((model as ProviderChain).providers);

/** A model as a provider chain: a chain as it is, one model as a chain of one provider named `"model"`. */
export const chainOf = (model: LanguageModel | ProviderChain): ProviderChain => (isChain(model) ? model : { providers: [{ name: 'model', model }] });

/** The name of a model for an `agent.spawning` rune: its model id, or its chain's first provider's. */
function modelName(model: LanguageModel | ProviderChain): { model?: string } {
  const first = isChain(model) ? model.providers[0]?.model : model;
  const id = typeof first === 'string' ? first : (first as { modelId?: unknown } | undefined)?.modelId;
  return typeof id === 'string' && id.length > 0 ? { model: id } : {};
}

/** What {@link agentRoles} resolves roles from: `agentEpics`' defaults and its `agents`. */
export interface AgentRolesOptions {
  readonly model: LanguageModel | ProviderChain;
  readonly tools: readonly AnyTool[];
  readonly system: string | undefined;
  readonly prices: PriceTable | undefined;
  readonly agents: Readonly<Record<string, AgentProfile>> | AgentProfiles | undefined;
}

/** Every agent's model, tools and limits, by the role of its lifecycle (none: the defaults). */
export interface AgentRoles {
  /** Whether there are roles: only then is there a scope, a chooser (and, with delegation, a `delegate` tool). */
  readonly any: boolean;
  /** Whether agents are offered `delegate`. */
  readonly delegation: boolean;
  /** Each fixed role's model as its lifecycle's spawn input names it, for the delegation's `agent.spawning`. */
  readonly modelNames: Readonly<Record<string, { model?: string }>>;
  /** The model call of an agent without a role. */
  readonly defaults: AgentModelOptions;
  /** The model call of a turn's agent, by its role. */
  readonly chooseModel: AgentModelChooser;
  /** Which tools a call's agent may run (its role's and `delegate`), or why not. */
  readonly scope: ToolScope;
  /** Why an agent of an unknown role cannot start. */
  readonly initError: (lifecycle: AgentLifecycleState) => string | undefined;
  /** Every tool any agent may call, `delegate` included, and those of roles added later: what the tool-call effects run. */
  readonly tools: ToolRegistry;
  /** Every chain any role calls (or may: the toolkit's), one per set of providers, for the breakers' clocks. */
  readonly chains: readonly ProviderChain[];
  /** The budget of a role, if it has one. */
  readonly budgetOf: (role: string) => Budget | undefined;
}

/**
 * Resolves `agentEpics`' roles: an agent's role is the `role` of its lifecycle's spawn input, and
 * its `AgentProfile` gives its model, tools, system prompt and budget (each defaulting to
 * `agentEpics`' own). Roles are looked up when an agent needs them, so a role added to
 * {@link AgentProfiles} while the engine runs is one from then on. With roles every agent runs
 * only its role's tools: a call naming any other is refused, naming the tool and the role; with
 * delegation every agent is also offered `delegate`.
 */
export function agentRoles(options: AgentRolesOptions): AgentRoles {
  const { model, tools, system, prices, agents } = options;
  const chain = chainOf(model);
  const profiles = isAgentProfiles(agents) ? agents : agentProfiles({ fixed: agents ?? {} });
  const any = isAgentProfiles(agents) || Object.keys(profiles.fixed).length > 0;
  const delegate = profiles.delegation ? [delegateTool(profiles.fixed)] : [];
  const modelOf = (chosen: ProviderChain, chosenTools: readonly AnyTool[], chosenSystem: string | undefined): AgentModelOptions => ({
    call: (request, context) => chainCall$(chosen, request, context),
    tools: toolSpecs([...chosenTools, ...delegate]),
    ...(chosenSystem === undefined ? {} : { system: chosenSystem }),
    ...(prices === undefined ? {} : { prices }),
  });
  const defaults = modelOf(chain, tools, system);
  // One breaker epic per provider name: the breakers are streams named by provider.
  const chains = [chain];
  const roleChains = [...Object.values(profiles.fixed).map((profile) => profile.model), ...Object.values(profiles.toolkit?.chains ?? {})];
  for (const each of roleChains) {
    const profileChain = each === undefined ? chain : chainOf(each);
    const named = new Set(chains.flatMap((known) => known.providers.map((provider) => provider.name)));
    if (profileChain.providers.some((provider) => !named.has(provider.name))) chains.push(profileChain);
  }
  // Every tool any agent may call; a name two profiles share must be the same tool.
  const clash = profiles.tools.clash([...tools, ...delegate]);
  if (clash !== undefined) throw new TypeError(`agentEpics: ${clash}`);
  profiles.tools.add([...tools, ...delegate]);
  // Each profile's model call and tool names, made once per profile object.
  const made = new WeakMap<AgentProfile, { readonly call: AgentModelOptions; readonly names: ReadonlySet<string> }>();
  const madeOf = (profile: AgentProfile) => {
    let known = made.get(profile);
    if (known === undefined) {
      const chosenTools = profile.tools ?? tools;
      known = {
        call: modelOf(profile.model === undefined ? chain : chainOf(profile.model), chosenTools, profile.system ?? system),
        names: namesOf(chosenTools),
      };
      made.set(profile, known);
    }
    return known;
  };
  const noProfile = (role: string): string => `no agent profile for role "${role}"; the roles are ${profiles.roles().join(', ')}`;
  // Each role's tool names, and those of an agent without a role: a model sees only its own, and
  // a call naming another role's tool is refused rather than run from the shared registry.
  const namesOf = (chosenTools: readonly AnyTool[]): ReadonlySet<string> => new Set([...chosenTools, ...delegate].map((tool) => tool.name));
  const defaultNames = namesOf(tools);
  const scope: ToolScope = (stream, toolName, context) => {
    const agent = agentOfCall(stream);
    if (agent === undefined) return of(undefined);
    return context.snapshot(agent.lifecycle, agentLifecycle).pipe(
      map((lifecycle) => {
        const role = lifecycle?.state.role;
        const profile = role === undefined ? undefined : profiles.get(role);
        if (role !== undefined && profile === undefined) return noProfile(role);
        const names = profile === undefined ? defaultNames : madeOf(profile).names;
        if (names.has(toolName)) return undefined;
        const known = names.size === 0 ? 'none' : [...names].map((name) => `"${name}"`).join(', ');
        return `tool "${toolName}" is not a tool of ${role === undefined ? 'this agent (it has no role)' : `role "${role}"`}; its tools are: ${known}`;
      }),
    );
  };
  const chooseModel: AgentModelChooser = (turn, context) =>
    context.snapshot(agentOfTurn(turn)!.lifecycle, agentLifecycle).pipe(
      map((lifecycle) => {
        const role = lifecycle?.state.role;
        if (role === undefined) return defaults;
        const profile = profiles.get(role);
        if (profile === undefined) throw new Error(noProfile(role));
        return madeOf(profile).call;
      }),
    );
  return {
    any,
    delegation: delegate.length > 0,
    modelNames: Object.fromEntries(Object.entries(profiles.fixed).map(([role, profile]) => [role, modelName(profile.model ?? model)])),
    defaults,
    chooseModel,
    scope,
    initError: (lifecycle) => (lifecycle.role === undefined || profiles.get(lifecycle.role) !== undefined ? undefined : noProfile(lifecycle.role)),
    tools: profiles.tools,
    chains,
    budgetOf: (role) => profiles.get(role)?.budget,
  };
}
