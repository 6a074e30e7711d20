import { canonicalJson } from '../canonical-json.js';
import type { AgentConfig, AgentDefinition, McpServerConfig } from './definition.js';

/**
 * The MCP servers a configuration declares: the only commands an agent definition registered at
 * runtime (over the protocol, or read back from the log) may start. A definition names the
 * `shared` ones in its `tools`, by name; it carries a server inline only where its configured
 * role carries that very server (the configuration file's own roles).
 */
export interface DeclaredMcpServers {
  /** The configuration's servers by name (its top-level `mcpServers`). Default: none. */
  readonly shared?: Readonly<Record<string, McpServerConfig>>;
  /** Each configured role's inline servers (its `mcpServers`), by role. Default: none. */
  readonly roles?: Readonly<Record<string, Readonly<Record<string, McpServerConfig>>>>;
}

/** Why a definition may not start an MCP server it carries, with the path of that server. */
export interface UndeclaredMcpServer {
  readonly path: readonly ['mcpServers', string];
  readonly message: string;
}

/**
 * The first MCP server `definition` carries inline (`mcpServers.<name>`, a command) that
 * `declared` does not declare for its role exactly as given (same command, args, env and cwd);
 * `undefined` when every one is declared. Such a server never starts: a definition from a client
 * names the configuration's servers by name in its `tools` instead.
 */
export function undeclaredMcpServer(definition: Pick<AgentDefinition, 'name' | 'mcpServers'>, declared: DeclaredMcpServers): UndeclaredMcpServer | undefined {
  const role = declared.roles !== undefined && Object.hasOwn(declared.roles, definition.name) ? declared.roles[definition.name] : undefined;
  for (const [name, server] of Object.entries(definition.mcpServers)) {
    const configured = role !== undefined && Object.hasOwn(role, name) ? role[name] : undefined;
    if (configured !== undefined && canonicalJson(configured) === canonicalJson(server)) continue;
    const shared = Object.keys(declared.shared ?? {});
    return {
      path: ['mcpServers', name],
      message: `MCP server "${name}" is given as a command, which the configuration does not declare for agent "${definition.name}": a registered definition names the configuration's MCP servers in its "tools" (${shared.length === 0 ? 'none are declared' : shared.map((s) => `"${s}"`).join(', ')}), never a command`,
    };
  }
  return undefined;
}

/**
 * The MCP server a role's tool name stands for: its own (`mcpServers`), else the configuration's
 * shared one of that name; `undefined` for a built-in (or unknown) tool.
 */
export function mcpServerOf(agent: Pick<AgentConfig, 'mcpServers'>, tool: string, shared: Readonly<Record<string, McpServerConfig>> = {}): McpServerConfig | undefined {
  if (Object.hasOwn(agent.mcpServers, tool)) return agent.mcpServers[tool];
  return Object.hasOwn(shared, tool) ? shared[tool] : undefined;
}
