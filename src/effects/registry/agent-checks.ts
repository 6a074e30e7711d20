import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { Observable, catchError, concat, defer, filter, from, mergeMap, of } from 'rxjs';
import type { AgentDefinition } from '../../reducers/agent-registration/definition.js';
import { mcpServerOf, undeclaredMcpServer, type DeclaredMcpServers } from '../../reducers/agent-registration/mcp-servers.js';
import { errorText } from '../../reducers/error-text.js';
import type { EpicCommand } from '../../streams/epic.js';
import { chainCall$, type ChainContext, type ProviderChain } from '../llm/provider-chain.js';
import { builtinTools } from '../tools/builtin-tools.js';
import { connectMcp } from '../tools/connect-mcp.js';
import type { AgentProfiles } from '../agent/agent-profiles.js';
import type { AnyTool } from '../tools/tool.js';

/** Options of {@link agentChecks$}. */
export interface AgentChecksOptions {
  /** The chains (and models, each a chain of one) a definition's `model` may name, by name. */
  readonly chains: Readonly<Record<string, ProviderChain>>;
  /**
   * The MCP servers the configuration declares: a definition's `tools` name the `shared` ones, and
   * it carries a server inline (a command) only where its configured role carries that very one
   * (see `undeclaredMcpServer`); any other inline server fails the checks before anything starts,
   * and is never made live. Default: none declared (a definition may start no command at all);
   * `agentRegistry`'s `shared` default to its `profiles`' toolkit's.
   */
  readonly mcpServers?: DeclaredMcpServers;
  /** What becomes of a checked MCP server's stderr. Default `'ignore'`. */
  readonly mcpStderr?: 'inherit' | 'pipe' | 'ignore';
  /**
   * The live roles (`agentProfiles`, with its toolkit) that an ACTIVE registration's definition
   * joins: its checks then refuse a tool whose name another role's different tool has. Default:
   * none (definitions are checked, not made live).
   */
  readonly profiles?: AgentProfiles;
}

/** What {@link agentChecks$} emits: the breaker commands of its model call, then its verdict. */
export type AgentCheckOutput = { readonly type: 'command'; readonly command: EpicCommand } | { readonly type: 'verdict'; readonly error?: string };

/** The tiny request that proves a model answers. */
const PING = { messages: [{ role: 'user' as const, content: 'Reply with the word OK.' }], tools: {} };

/** Compiles a tool's input JSON Schema (AJV, as the MCP SDK validates arguments): why it does not compile, or `undefined`. */
export function toolSchemaError(validator: AjvJsonSchemaValidator, tool: string, schema: unknown): string | undefined {
  try {
    validator.getValidator(schema as Parameters<AjvJsonSchemaValidator['getValidator']>[0]);
    return undefined;
  } catch (error) {
    return `the input schema of tool "${tool}" does not compile: ${errorText(error)}`;
  }
}

/**
 * The real checks of an agent definition's activation (seed 002's "init"), in order, stopping at
 * the first that fails:
 *
 * 1. every MCP server it carries inline (a command) is one `mcpServers` declares for its role
 *    (never a client's command); its `model` names a known chain or model, each of its `tools`
 *    is a built-in tool, one of its `mcpServers` or a shared one of `mcpServers`, and its client tools' input schemas compile (AJV, as MCP validates); with
 *    `profiles`, none of its built-in or client tools' names is a different tool's of another role;
 * 2. each MCP server its `tools` name starts (stdio) and lists its tools, and every tool's input
 *    JSON Schema compiles (the built-in tools' too), and (with `profiles`) no tool's name is
 *    another role's tool's; each server is stopped again after;
 * 3. the model answers one tiny call through its provider chain: the chain's breaker commands are
 *    emitted as it goes (the caller dispatches them), so a provider that fails here counts as it
 *    would in a conversation.
 *
 * Then it emits its verdict, `{type: 'verdict'}` or `{type: 'verdict', error}` naming what failed,
 * and completes. It never errors. Unsubscribing stops the model call; an MCP server being started
 * is stopped once it has started.
 */
export function agentChecks$(definition: AgentDefinition, options: AgentChecksOptions, context: ChainContext): Observable<AgentCheckOutput> {
  const { chains, mcpStderr = 'ignore', profiles, mcpServers: declared = {} } = options;
  const serverOf = (name: string) => mcpServerOf(definition, name, declared.shared);
  // A configured role's profile is fixed (built at start); any other definition's joins the live roles.
  const joins = profiles?.toolkit !== undefined && !Object.hasOwn(profiles.fixed, definition.name) ? profiles : undefined;
  const clashOf = (tools: readonly AnyTool[]): string | undefined => {
    const why = joins?.clash(definition.name, { tools });
    return why === undefined ? undefined : `tool name clash: ${why}`;
  };
  const verdict = (error?: string): AgentCheckOutput => (error === undefined ? { type: 'verdict' } : { type: 'verdict', error });
  return defer(() => {
    const undeclared = undeclaredMcpServer(definition, declared);
    if (undeclared !== undefined) return of(verdict(undeclared.message));
    const chain = Object.hasOwn(chains, definition.model) ? chains[definition.model] : undefined;
    if (chain === undefined)
      return of(
        verdict(
          `unknown chain or model "${definition.model}"; the known ones are ${
            Object.keys(chains)
              .map((name) => `"${name}"`)
              .join(', ') || '(none)'
          }`,
        ),
      );
    const builtin = new Map(builtinTools().map((tool) => [tool.name, tool]));
    const validator = new AjvJsonSchemaValidator();
    const staticError = (): string | undefined => {
      for (const name of definition.tools) {
        const tool = builtin.get(name);
        if (tool !== undefined) {
          const error = toolSchemaError(validator, name, tool.inputSchema);
          if (error !== undefined) return error;
        } else if (serverOf(name) === undefined) {
          return `unknown tool "${name}": not a built-in tool (${[...builtin.keys()].join(', ')}) nor an MCP server of this agent or the configuration`;
        }
      }
      for (const tool of definition.clientTools ?? []) {
        if (builtin.has(tool.name)) return `client tool "${tool.name}" has a built-in tool's name`;
        const error = toolSchemaError(validator, tool.name, tool.inputSchema);
        if (error !== undefined) return error;
      }
      if (joins === undefined) return undefined;
      const { toolkit } = joins;
      const named = definition.tools.flatMap((name) => (serverOf(name) !== undefined ? [] : [toolkit!.builtin.get(name)!]));
      return clashOf([...named, ...(definition.clientTools ?? []).map((spec) => toolkit!.clientTool(spec))]);
    };
    const mcpError = async (): Promise<string | undefined> => {
      for (const name of definition.tools) {
        const server = serverOf(name);
        if (server === undefined) continue;
        let connection;
        try {
          connection = await connectMcp({ ...server, name, stderr: mcpStderr });
        } catch (error) {
          return `MCP server "${name}" did not start: ${errorText(error)}`;
        }
        try {
          for (const tool of connection.tools) {
            const error = toolSchemaError(validator, tool.name, tool.inputSchema);
            if (error !== undefined) return `MCP server "${name}": ${error}`;
          }
          // The check's connection's tools are not the ones the profile will have: any name taken clashes.
          const taken = joins === undefined ? undefined : connection.tools.find((tool) => joins.tools.get(tool.name) !== undefined);
          if (taken !== undefined) return `tool name clash: MCP server "${name}": a tool is already named "${taken.name}"; tool names must be unique`;
        } finally {
          await connection.close().catch(() => undefined);
        }
      }
      return undefined;
    };
    const modelCall$ = chainCall$(chain, { ...PING, ...(definition.system === undefined ? {} : { system: definition.system }) }, context).pipe(
      filter((output) => output.type === 'command'),
    );
    const known = staticError();
    if (known !== undefined) return of(verdict(known));
    return from(mcpError()).pipe(
      mergeMap((error) => {
        if (error !== undefined) return of(verdict(error));
        return concat(modelCall$, of(verdict())).pipe(catchError((cause: unknown) => of(verdict(`the model did not answer: ${errorText(cause)}`))));
      }),
    );
  }).pipe(
    // A check that threw (it should not) is a failed check, not a failed effect.
    catchError((error: unknown) => of(verdict(errorText(error)))),
  );
}
