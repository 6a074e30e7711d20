import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { AgentEpicsOptions } from '../../effects/agent/agent-epics.js';
import type { AgentProfile } from '../../effects/agent/agent-profile.js';
import { buildAgentProfile, profileToolkit, type BuiltProfile, type ProfileToolkit } from '../../effects/agent/agent-profile-builder.js';
import { demoScriptedModel } from '../../effects/llm/demo-model.js';
import { modelIdOf } from '../../effects/llm/model-call.js';
import type { Provider } from '../../effects/llm/model-types.js';
import type { PriceTable } from '../../reducers/budget.js';
import type { ProviderChain } from '../../effects/llm/provider-chain.js';
import { scriptedModel } from '../../effects/llm/scripted-model.js';
import type { DeclaredMcpServers } from '../../reducers/agent-registration/mcp-servers.js';
import { ServerConfigError, type ModelConfig, type ServerConfig } from './server-config.js';

/** Options of {@link configuredAgents}, with their defaults. */
export interface ConfiguredAgentsOptions {
  /** Where the configuration came from, for errors (a missing API key variable). Default `'the configuration'`. */
  readonly source?: string;
  /** What becomes of the MCP servers' stderr. Default `'inherit'`. */
  readonly mcpStderr?: 'inherit' | 'pipe' | 'ignore';
  /**
   * What an MCP server that does not start does: `'throw'` rejects (stopping those started), or
   * `'skip'` leaves its tools out of its role and calls this with why (the agent registry then
   * holds the role in ERROR). Default `'throw'`.
   */
  readonly onMcpFailure?: 'throw' | ((role: string, server: string, error: unknown) => void);
}

/** A {@link ServerConfig} made live: what the agent epics take. */
export interface ConfiguredAgents {
  /** Every chain by name, and every model by its name as a chain of that one model. Each is one object, shared by every role that names it (and so are its providers' breakers). */
  readonly chains: Readonly<Record<string, ProviderChain>>;
  /** How each role's agents run, by role. */
  readonly profiles: Readonly<Record<string, AgentProfile>>;
  /** What the profiles were built from: the agent registry builds those of definitions registered at runtime from it too. */
  readonly toolkit: ProfileToolkit;
  /** The MCP servers the configuration declares (its top-level ones, and each role's own): all a registered definition may start (`agentRegistry({ mcpServers })`). */
  readonly mcpServers: DeclaredMcpServers;
  readonly defaultRole: string;
  /** The default role's model, tools and system prompt: what `runestream serve` passes to `agentEpics` (and `reactAgentEpics`). */
  readonly defaults: Pick<AgentEpicsOptions, 'model' | 'tools' | 'system'> & { readonly model: ProviderChain };
  /** The default role's chain in words: `chain "main": local (llama3.2 at http://localhost:11434/v1), then offline (the offline scripted demo model)`. */
  readonly description: string;
  /** The configured `prices`, keyed by each model's id (what a response names): `agentEpics({ prices })`. */
  readonly prices: PriceTable;
  /** Stops the MCP servers started for the agents' tools. */
  close(): Promise<void>;
}

/** A model in words, for the log line that says which chain serves. */
const describeModel = (name: string, model: ModelConfig): string =>
  model.type === 'openai-compatible' ? `${model.model} at ${model.baseURL}` : model.type === 'demo' ? 'the offline scripted demo model' : `the scripted model "${name}"`;

/**
 * Turns a checked {@link ServerConfig} into what the agent epics take.
 *
 * 1. Each model becomes a {@link Provider} named after it (its breaker is `provider/<name>`, with
 *    the model's `breaker` settings, one object whatever chains it is in): an
 *    OpenAI-compatible model with the key from the environment variable `apiKeyEnv` names (read
 *    from `env`; a variable that is not set is a `config_invalid` error), the offline demo model,
 *    or a scripted model that cycles through its answers.
 * 2. Each chain becomes a `ProviderChain` of those providers; a model named where a chain
 *    may be is a chain of that one model.
 * 3. The MCP servers that the roles' `tools` name (a role's own `mcpServers`, else the
 *    configuration's top-level ones by name) are started (stdio), their tools named
 *    `<server>__<tool>`; if one fails to start, the ones started are stopped and this rejects.
 * 4. Each role gets an `AgentProfile` (model, tools, system, budget, description), and the default
 *    role's model, tools and system are `defaults`, for `agentEpics`.
 *
 * ## Example
 * ```ts
 * import { configuredAgents, parseServerConfig } from 'runestream/server';
 * const config = parseServerConfig(
 *   JSON.stringify({ models: { offline: { type: 'demo' } }, agents: { assistant: { model: 'offline', tools: ['clock', 'add'] } }, defaultRole: 'assistant' }),
 *   'runestream.json',
 * );
 * const agents = await configuredAgents(config, process.env);
 * console.log(agents.description, agents.defaults.tools?.map((tool) => tool.name));
 * // Logs: the offline scripted demo model [ 'clock', 'add' ]
 * await agents.close();
 * ```
 */
export async function configuredAgents(config: ServerConfig, env: NodeJS.ProcessEnv, options: ConfiguredAgentsOptions = {}): Promise<ConfiguredAgents> {
  const { source = 'the configuration', mcpStderr = 'inherit', onMcpFailure = 'throw' } = options;
  const providers = new Map<string, Provider>(
    Object.entries(config.models).map(([name, model]): [string, Provider] => [
      name,
      { name, model: languageModelOf(name, model, env, source), ...(model.breaker === undefined ? {} : { breaker: model.breaker }) },
    ]),
  );
  const chains: Record<string, ProviderChain> = {};
  const descriptions: Record<string, string> = {};
  for (const [name, model] of Object.entries(config.models)) {
    chains[name] = { providers: [providers.get(name)!] };
    descriptions[name] = describeModel(name, model);
  }
  for (const [name, chain] of Object.entries(config.chains)) {
    chains[name] = {
      providers: chain.models.map((model) => providers.get(model)!),
      ...(chain.callTimeoutMs === undefined ? {} : { callTimeoutMs: chain.callTimeoutMs }),
    };
    descriptions[name] = `chain "${name}": ${chain.models.map((model) => `${model} (${descriptions[model]})`).join(', then ')}`;
  }

  const maxResultBytes = config.toolCalls?.maxResultBytes;
  const toolkit = profileToolkit(chains, { mcpStderr, mcpServers: config.mcpServers ?? {}, ...(maxResultBytes === undefined ? {} : { mcpMaxResultBytes: maxResultBytes }) });
  const built: BuiltProfile[] = [];
  const close = async (): Promise<void> => {
    await Promise.all(built.splice(0).map((profile) => profile.close()));
  };
  const profiles: Record<string, AgentProfile> = {};
  try {
    for (const [role, agent] of Object.entries(config.agents)) {
      const one = await buildAgentProfile(agent, toolkit, onMcpFailure === 'throw' ? undefined : (server, error) => onMcpFailure(role, server, error));
      built.push(one);
      profiles[role] = one.profile;
    }
  } catch (error) {
    await close();
    throw error;
  }

  const { defaultRole } = config;
  const defaultAgent = config.agents[defaultRole]!;
  const profile = profiles[defaultRole]!;
  return {
    chains,
    profiles,
    toolkit,
    mcpServers: { shared: config.mcpServers ?? {}, roles: Object.fromEntries(Object.entries(config.agents).map(([role, agent]) => [role, agent.mcpServers])) },
    defaultRole,
    defaults: { model: chains[defaultAgent.model]!, tools: profile.tools ?? [], ...(profile.system === undefined ? {} : { system: profile.system }) },
    description: descriptions[defaultAgent.model]!,
    // A response's cost is looked up by the id of the model that answered it.
    prices: Object.fromEntries(Object.entries(config.prices).map(([name, price]) => [modelIdOf(chains[name]!.providers[0]!.model), price])),
    close,
  };
}

/** The AI SDK model a configured model is. */
function languageModelOf(name: string, model: ModelConfig, env: NodeJS.ProcessEnv, source: string): Provider['model'] {
  switch (model.type) {
    case 'demo':
      return demoScriptedModel();
    case 'scripted':
      return scriptedModel(model.answers, { modelId: name, whenExhausted: 'cycle', keepCalls: 0 }); // served for long: no call kept
    case 'openai-compatible': {
      const apiKey = model.apiKeyEnv === undefined ? undefined : env[model.apiKeyEnv];
      if (model.apiKeyEnv !== undefined && !apiKey) {
        throw new ServerConfigError(source, [{ path: `models.${name}.apiKeyEnv`, message: `the environment variable ${model.apiKeyEnv} is not set: set it to the API key` }]);
      }
      const provider = createOpenAICompatible({ name: 'openai-compatible', baseURL: model.baseURL, ...(apiKey ? { apiKey } : {}), includeUsage: true });
      return provider(model.model);
    }
  }
}
