import type { AgentConfig, ClientTool, McpServerConfig } from '../../reducers/agent-registration/definition.js';
import { mcpServerOf } from '../../reducers/agent-registration/mcp-servers.js';
import type { ProviderChain } from '../llm/provider-chain.js';
import { builtinTools } from '../tools/builtin-tools.js';
import { clientTool } from '../tools/client-tool.js';
import { connectMcp, type McpConnection } from '../tools/connect-mcp.js';
import type { AnyTool } from '../tools/tool.js';
import { DEFAULT_MAX_TOOL_RESULT_BYTES } from '../tools/tool-result-limits.js';
import type { AgentProfile } from './agent-profile.js';

/**
 * What agent profiles are built from, shared by every role, configured or registered at runtime:
 * the chains by name, and one object per built-in tool and per client tool spec, so two roles
 * naming the same tool share it (a tool registry holds a name once).
 */
export interface ProfileToolkit {
  /** Every chain and model (a chain of one) a role's `model` may name, by name. */
  readonly chains: Readonly<Record<string, ProviderChain>>;
  /** The built-in tools by name, one object each. */
  readonly builtin: ReadonlyMap<string, AnyTool>;
  /** The largest message each MCP server may send (`connectMcp`'s `maxResultBytes`). Default 1,000,000. */
  readonly mcpMaxResultBytes: number;
  /** What becomes of the MCP servers' stderr. */
  readonly mcpStderr: 'inherit' | 'pipe' | 'ignore';
  /** The configuration's MCP servers by name (its top-level `mcpServers`), which a role's `tools` may name besides its own. */
  readonly mcpServers: Readonly<Record<string, McpServerConfig>>;
  /** The client tool of `spec`: the one made for an identical spec before (shared), else a new one. */
  clientTool(spec: ClientTool): AnyTool;
}

/** A toolkit over `chains` (and the shared `mcpServers`, default none): fresh built-in tools, no client tools yet. */
export function profileToolkit(
  chains: Readonly<Record<string, ProviderChain>>,
  options: {
    readonly mcpStderr?: 'inherit' | 'pipe' | 'ignore';
    readonly mcpMaxResultBytes?: number;
    readonly mcpServers?: Readonly<Record<string, McpServerConfig>>;
  } = {},
): ProfileToolkit {
  const builtin = new Map(builtinTools().map((tool) => [tool.name, tool]));
  const clientTools = new Map<string, { readonly spec: string; readonly tool: AnyTool }>();
  return {
    chains,
    builtin,
    mcpMaxResultBytes: options.mcpMaxResultBytes ?? DEFAULT_MAX_TOOL_RESULT_BYTES,
    mcpStderr: options.mcpStderr ?? 'inherit',
    mcpServers: options.mcpServers ?? {},
    clientTool: (spec) => {
      const json = JSON.stringify(spec);
      const known = clientTools.get(spec.name);
      if (known !== undefined) return known.spec === json ? known.tool : clientTool(spec);
      const tool = clientTool(spec);
      clientTools.set(spec.name, { spec: json, tool });
      return tool;
    },
  };
}

/** A role's profile made live: the profile, and the MCP servers started for its tools. */
export interface BuiltProfile {
  readonly profile: AgentProfile;
  /** Stops the MCP servers started for its tools. */
  close(): Promise<void>;
}

/**
 * Makes a role of a configuration, or an agent definition, live: its model is the toolkit's chain
 * it names, its tools the built-in tools it names, the tools of the MCP servers it names (its own
 * `mcpServers`, else the toolkit's shared ones by name; each started over stdio, its tools named
 * `<server>__<tool>`) and its client tools; then its system
 * prompt, budget and description. An MCP server that does not start stops the ones started and
 * rejects, unless `onMcpFailure` is given: then its tools are left out and it is told why.
 * An unknown chain or tool rejects, naming it.
 */
export async function buildAgentProfile(agent: AgentConfig, toolkit: ProfileToolkit, onMcpFailure?: (server: string, error: unknown) => void): Promise<BuiltProfile> {
  const model = Object.hasOwn(toolkit.chains, agent.model) ? toolkit.chains[agent.model] : undefined;
  if (model === undefined) throw new Error(`unknown chain or model "${agent.model}"`);
  const connections: McpConnection[] = [];
  const close = async (): Promise<void> => {
    await Promise.all(connections.splice(0).map((connection) => connection.close()));
  };
  const tools: AnyTool[] = [];
  try {
    for (const name of agent.tools) {
      const server = mcpServerOf(agent, name, toolkit.mcpServers);
      if (server === undefined) {
        const tool = toolkit.builtin.get(name);
        if (tool === undefined) throw new Error(`unknown tool "${name}": not a built-in tool nor an MCP server of the agent or the configuration`);
        tools.push(tool);
        continue;
      }
      let connection: McpConnection;
      try {
        connection = await connectMcp({ ...server, name, stderr: toolkit.mcpStderr, maxResultBytes: toolkit.mcpMaxResultBytes });
      } catch (error) {
        if (onMcpFailure === undefined) throw error;
        onMcpFailure(name, error);
        continue;
      }
      connections.push(connection);
      tools.push(...connection.tools);
    }
  } catch (error) {
    await close();
    throw error;
  }
  for (const spec of agent.clientTools ?? []) tools.push(toolkit.clientTool(spec));
  const profile: AgentProfile = {
    model,
    tools,
    ...(agent.system === undefined ? {} : { system: agent.system }),
    ...(agent.budget === undefined ? {} : { budget: agent.budget }),
    ...(agent.description === undefined ? {} : { description: agent.description }),
  };
  return { profile, close };
}
