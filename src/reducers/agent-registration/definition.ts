import { z } from 'zod';
import { Budget } from '../budget.js';
import { errorText } from '../error-text.js';

/**
 * A name in a configuration or a definition (a model, a chain, a role, an MCP server, an agent): it
 * becomes part of a stream id (`provider/<model>`, `agent-def/<agent>`) and of tool names
 * (`<server>__<tool>`), so letters, digits, `_`, `-`, `.`.
 */
export const ConfigName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'must be 1 to 64 letters, digits, "_", "-" or "." (starting with a letter or digit)');
/** The name of an environment variable. */
export const EnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be an environment variable name such as OPENAI_API_KEY');
const Text = (max: number) => z.string().max(max);

/** The most MCP servers one agent names. */
export const MAX_AGENT_MCP_SERVERS = 16;

/** An MCP server the agent's tools come from, started over stdio. */
export const McpServerConfig = z.strictObject({
  command: z.string().min(1).max(4096),
  args: z.array(Text(4096)).max(256).default([]),
  /** Extra environment variables of the server (it gets only a safe few of this process's besides). */
  env: z.record(EnvName, Text(32_768)).default({}),
  cwd: z.string().min(1).max(4096).optional(),
  /** Refused: the MCP SDK's HTTP transports are not wired in; run the server as a stdio command. */
  url: z.never({ error: 'an MCP server over a URL (HTTP or SSE) is not supported: give its stdio "command" (with "args" and "env") instead' }).optional(),
});
export type McpServerConfig = z.infer<typeof McpServerConfig>;

/** The most client tools one agent has. */
export const MAX_CLIENT_TOOLS = 32;
/** The longest input schema of a client tool, as JSON. */
export const MAX_TOOL_SCHEMA_BYTES = 32_768;

/**
 * The JSON Schema (draft-07) of a client tool's input: an object schema that compiles (zod's
 * `z.fromJSONSchema`, which the tool's arguments are then checked with), at most
 * {@link MAX_TOOL_SCHEMA_BYTES} as JSON. One that does not compile is refused with zod's reason.
 */
export const ToolInputSchema = z.record(z.string(), z.unknown()).superRefine((schema, context) => {
  const bytes = JSON.stringify(schema).length;
  if (bytes > MAX_TOOL_SCHEMA_BYTES) {
    context.addIssue({ code: 'custom', message: `is ${bytes} characters as JSON; at most ${MAX_TOOL_SCHEMA_BYTES}` });
    return;
  }
  if (schema.type !== 'object')
    context.addIssue({ code: 'custom', message: `must be an object schema ("type": "object"), as model APIs require; got ${JSON.stringify(schema.type ?? null)}` });
  try {
    z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
  } catch (error) {
    context.addIssue({ code: 'custom', message: `does not compile: ${errorText(error)}` });
  }
});

/**
 * A tool the conversation's client runs: the model sees its name, description and input schema;
 * a call waits in `executing` until the client dispatches its `success{output}` (or
 * `execution_error{error}`) to the call's stream, or its `timeoutMs` passes.
 */
export const ClientTool = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, "_" or "-" (what model APIs accept)'),
  description: Text(2000),
  inputSchema: ToolInputSchema,
  /** How long a call waits for the client, in ms. Default 600,000 (10 minutes). */
  timeoutMs: z.number().int().positive().max(86_400_000).optional(),
});
export type ClientTool = z.infer<typeof ClientTool>;

/** How the agents of one role run: what a conversation instantiates when it spawns that role. */
export const AgentConfig = z.strictObject({
  /** Shown to a model that may delegate to this role. */
  description: Text(2000).optional(),
  /** A chain's name, or a model's (a chain of that one model). */
  model: ConfigName,
  /** Built-in tool names (`clock`, `add`, `save_note`) and names of this agent's `mcpServers` (all of that server's tools). */
  tools: z.array(ConfigName).max(128).default([]),
  /** MCP servers by name; a server's tools are named `<name>__<tool>`. Only the servers `tools` names are started. */
  mcpServers: z
    .record(ConfigName, McpServerConfig)
    .refine((servers) => Object.keys(servers).length <= MAX_AGENT_MCP_SERVERS, `at most ${MAX_AGENT_MCP_SERVERS} MCP servers`)
    .default({}),
  /** Tools the conversation's client runs, declared by JSON Schema (see {@link ClientTool}). Default: none. */
  clientTools: z
    .array(ClientTool)
    .max(MAX_CLIENT_TOOLS)
    .refine((tools) => new Set(tools.map((tool) => tool.name)).size === tools.length, 'two client tools share a name')
    .optional(),
  system: Text(100_000).optional(),
  /** Limits on each agent of this role. */
  budget: Budget.optional(),
});
export type AgentConfig = z.infer<typeof AgentConfig>;

/**
 * An agent definition, as the agent registry holds it: a name (the role its agents have) and
 * exactly what a configuration file's role holds ({@link AgentConfig}). The spawn input of an
 * `agent-def/<name>` stream (machine `agent-registration`).
 */
export const AgentDefinition = AgentConfig.extend({ name: ConfigName });
export type AgentDefinition = z.infer<typeof AgentDefinition>;

/** The stream of an agent definition's registration: `agent-def/<name>`. */
export const agentDefinitionStream = (name: string): string => `agent-def/${name}`;

/** The agent name of a registration stream (`agent-def/<name>`), or `undefined` for any other stream. */
export const agentNameOf = (stream: string): string | undefined => (stream.startsWith('agent-def/') ? stream.slice('agent-def/'.length) : undefined);
