import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StdioServerParameters } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  ErrorCode,
  McpError,
  ProgressNotificationSchema,
  type CallToolResult,
  type Progress,
  type ProgressNotification,
  type Tool as McpToolDefinition,
} from '@modelcontextprotocol/sdk/types.js';
import { BoundedStdioClientTransport, MCP_MESSAGE_TOO_LARGE } from './mcp-stdio-transport.js';
import { DEFAULT_MAX_TOOL_RESULT_BYTES, checkMaxResultBytes, resultTooLarge } from './tool-result-limits.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { JSONSchema7 } from 'ai';
import { errorText } from '../../reducers/error-text.js';
import { shortened } from '../../reducers/shortened.js';
import { checkToolName, type Tool, type ToolInputCheck } from './tool.js';

/** An MCP tool as the server lists it: name, description, input schema, annotations (hints, untrusted). */
export type McpToolInfo = McpToolDefinition;

/** The arguments of an MCP tool call: a JSON object. */
export type McpArguments = Record<string, unknown>;

/** Options of {@link connectMcp}, with their defaults. */
export interface ConnectMcpOptions {
  /** The server's executable, e.g. `npx` or `process.execPath`. */
  command: string;
  /** Its arguments. Default none. */
  args?: string[];
  /**
   * Extra environment variables for the server. The SDK starts it with only a safe few of this
   * process's (`HOME`, `PATH`, `USER`, ... ) plus these: pass what the server needs (API keys).
   */
  env?: Record<string, string>;
  /** Its working directory. Default: this process's. */
  cwd?: string;
  /**
   * The prefix of its tools' names: `<name>__<tool>` (`github__create_issue`), so two servers'
   * `search` tools do not collide and the model sees where a tool comes from. Default: no prefix.
   */
  name?: string;
  /** What becomes of the server's stderr. Default `'inherit'` (this process's stderr). */
  stderr?: 'inherit' | 'pipe' | 'ignore';
  /**
   * Whether a call waits for approval: a boolean, or a function of the tool (with its annotations,
   * e.g. `(t) => !t.annotations?.readOnlyHint`) and the arguments. Default `false`.
   */
  needsApproval?: boolean | ((tool: McpToolInfo, input: McpArguments) => boolean);
  /** Longest run of a call before `execution_timeout`, in scheduler ms; `Infinity` for none. Default 60,000. */
  timeoutMs?: number;
  /**
   * The largest message the server may send, in bytes, counted while it is read (its tool list
   * and each call's result, as JSON-RPC lines): past it the rest of the message is dropped unread,
   * and the call it answers ends with `execution_error` "tool result too large: MCP tool "x"
   * returned N bytes, over M (maxResultBytes)"; the connection carries on. Also each tool's
   * `maxResultBytes`. A positive integer or `Infinity`. Default 1,000,000.
   */
  maxResultBytes?: number;
  /** Whether a call left executing by a crash may run again after a restart. Default `false`. */
  rerunSafe?: boolean | ((tool: McpToolInfo) => boolean);
  /**
   * Whether a tool's calls may run beside the other calls of their round. Default: the tools the
   * server annotates `readOnlyHint: true`; any other runs one at a time, in call order.
   */
  parallelSafe?: boolean | ((tool: McpToolInfo) => boolean);
  /** How this client introduces itself. Default `{ name: 'runestream', version: '0.1.0' }`. */
  clientInfo?: { name: string; version: string };
}

/** An open connection to an MCP server, and its tools. */
export interface McpConnection {
  /** The server's tools as runestream tools, listed once at connect (a later `tools/list_changed` is not followed). */
  readonly tools: readonly Tool<McpArguments, unknown>[];
  /**
   * The SDK client, for what the tools do not cover (resources, prompts): the current one (after
   * the connection dropped and a call reconnected, the new one).
   */
  readonly client: Client;
  /** Closes the connection and stops the server process. Calls in flight fail; later ones fail at once, with no reconnect. */
  close(): Promise<void>;
}

/** The longest delay a JavaScript timer takes. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** The SDK's own request timeout is only a backstop: the tool-call effects' timeout (on the engine's clock) comes first. */
const SDK_TIMEOUT_MARGIN_MS = 5000;

/**
 * Starts an MCP server over stdio and exposes its tools as runestream {@link Tool}s.
 *
 * 1. Spawns `command` with `args` (the SDK's `StdioClientTransport`), initializes, and lists the
 *    tools (every page). A server that fails to start or to answer is closed, and this rejects
 *    naming the command.
 * 2. Each tool keeps its JSON Schema input as the server lists it, straight through to the model.
 *    Its name is `<name>__<tool>` when `name` is given, with any character model APIs refuse
 *    (outside `A-Za-z0-9_-`) turned into `_`, and a name past 64 characters cut to 64 (its start,
 *    `_`, and 8 hex digits of a hash of the whole); the server is called with its own name.
 * 3. Arguments are checked here, before any approval is asked: they must be a JSON object (`null`
 *    or missing is `{}`) and match the tool's input schema (the SDK's own AJV validator). A schema
 *    AJV cannot compile is left to the server, which validates too (its refusal is a tool error).
 * 4. `execute` calls `tools/call` with the run's signal (an abort sends MCP's
 *    `notifications/cancelled` to the server, whose handler sees `extra.signal` abort) and turns
 *    each progress notification into a `progress(chunk)`: its `message`, else `progress/total`,
 *    else `progress`. Progress is routed by a token of its own, open until the call returns (the
 *    SDK's `onprogress` drops a notification that arrives together with the response), so every
 *    progress rune comes before the result. The SDK rejects an aborted call and a timed-out one with the same code
 *    (-32001): the signal tells them apart, and an aborted run rethrows the signal's reason.
 * 5. The output is the result's `structuredContent` if it has one, else its text when every
 *    content part is text (parts joined by newlines), else the content parts as they are. A result
 *    with `isError: true` (the tool failed, or refused the arguments) throws an Error whose message
 *    is its text, so the call ends with `execution_error` and the model reads why.
 * 6. A tool the server annotates `readOnlyHint: true` is `parallelSafe`: its calls run beside the
 *    others of their round; every other tool's run one at a time, in call order (option `parallelSafe`).
 * 7. Every message the server sends is held to `maxResultBytes` while it is read (see
 *    `BoundedStdioClientTransport`): an answer past it ends its call with `execution_error` "tool
 *    result too large: ..." and the rest of it is dropped unread, so it never takes this process's memory.
 * 8. A connection that drops (the server exited or crashed, or sent what could not be read) ends
 *    the calls in flight with `execution_error` saying so, and the next call starts the server
 *    again and reconnects (one attempt shared by the calls that ask meanwhile; one that fails
 *    fails its call, and the next call tries again). The tools are the ones listed at connect.
 *
 * ## Example
 * ```ts
 * import { createEngine } from 'runestream';
 * import { connectMcp, toolCallEffects } from 'runestream/agents';
 * // A stdio MCP server with one tool, made with the MCP SDK (any server command works the same way).
 * const server = `
 *   import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
 *   import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
 *   const server = new McpServer({ name: 'clock', version: '1.0.0' });
 *   server.registerTool('now', { description: 'The time now.' }, () => ({ content: [{ type: 'text', text: '12:00' }] }));
 *   await server.connect(new StdioServerTransport());
 * `;
 * const clock = await connectMcp({ command: process.execPath, args: ['--input-type=module', '--eval', server], name: 'clock' });
 * console.log(clock.tools.map((tool) => tool.name));
 * // Logs: [ 'clock__now' ]
 * const engine = createEngine({ epics: [toolCallEffects({ tools: clock.tools })] });
 * // ... later
 * await engine.close();
 * await clock.close();
 * ```
 *
 * @see toolCallEffects, toolSpecs
 */
export async function connectMcp(options: ConnectMcpOptions): Promise<McpConnection> {
  const {
    command,
    args = [],
    env,
    cwd,
    name,
    stderr = 'inherit',
    needsApproval = false,
    timeoutMs = 60_000,
    maxResultBytes = DEFAULT_MAX_TOOL_RESULT_BYTES,
    rerunSafe = false,
    parallelSafe = readOnly,
    clientInfo = { name: 'runestream', version: '0.1.0' },
  } = options;
  if (typeof command !== 'string' || command === '') throw new TypeError('connectMcp: "command" must be a non-empty string (the server executable)');
  if (name !== undefined) checkToolName('connectMcp: "name"', name);
  if (!(timeoutMs > 0)) throw new TypeError(`connectMcp: "timeoutMs" must be positive (Infinity for none), got ${String(timeoutMs)}`);
  checkMaxResultBytes('connectMcp', maxResultBytes);

  const server: StdioServerParameters = { command, args, ...(env === undefined ? {} : { env }), ...(cwd === undefined ? {} : { cwd }), stderr };
  const label = [command, ...args].join(' ');
  const progressOf = progressRoutes();
  const client = new Client(clientInfo);
  const transport = new BoundedStdioClientTransport(server, maxResultBytes);
  const listed: McpToolInfo[] = [];
  try {
    await client.connect(transport);
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? undefined : { cursor });
      listed.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  } catch (error) {
    await client.close().catch(() => undefined);
    throw new Error(`connectMcp: the MCP server "${label}" did not start or answer: ${errorText(error)}`, { cause: error });
  }
  progressOf.install(client);
  const link = reconnecting(client, label, async () => {
    const next = new Client(clientInfo);
    await next.connect(new BoundedStdioClientTransport(server, maxResultBytes));
    progressOf.install(next);
    return next;
  });

  const validator = new AjvJsonSchemaValidator();
  const sdkTimeoutMs = Math.min(MAX_TIMER_MS, timeoutMs + SDK_TIMEOUT_MARGIN_MS);
  const seen = new Map<string, string>();
  const asTool = (info: McpToolInfo): Tool<McpArguments, unknown> => {
    const toolName = exposedName(name, info.name);
    const clash = seen.get(toolName);
    if (clash !== undefined) throw new TypeError(`connectMcp: the server's tools "${clash}" and "${info.name}" would both be named "${toolName}"`);
    seen.set(toolName, info.name);
    const check = argumentsCheck(validator, info);
    return {
      name: toolName,
      description: info.description ?? info.title ?? info.name,
      inputSchema: info.inputSchema as JSONSchema7,
      parseInput: check,
      needsApproval: (input) => (typeof needsApproval === 'function' ? needsApproval(info, input) : needsApproval),
      timeoutMs,
      maxResultBytes,
      rerunSafe: typeof rerunSafe === 'function' ? rerunSafe(info) : rerunSafe,
      parallelSafe: typeof parallelSafe === 'function' ? parallelSafe(info) : parallelSafe,
      async execute(input, { signal, progress }) {
        let result: CallToolResult;
        const progressToken = progressOf((p) => progress(progressChunk(p)));
        try {
          const current = await link.connected();
          // A progress notification that arrived with the response is handled a microtask after
          // it, but before this await resumes: the token stays open until then.
          result = (await current.callTool({ name: info.name, arguments: input, _meta: { progressToken } }, undefined, { signal, timeout: sdkTimeoutMs })) as CallToolResult;
        } catch (error) {
          // Abort and timeout share McpError -32001: only the signal says it was ours.
          if (signal.aborted) throw signal.reason;
          throw callFailure(error, toolName, link);
        } finally {
          progressOf.done(progressToken);
        }
        if (result.isError === true) throw new Error(textOf(result) || `MCP tool "${info.name}" failed without a message`);
        return outputOf(result);
      },
    };
  };
  let tools: Tool<McpArguments, unknown>[];
  try {
    tools = listed.map(asTool);
  } catch (error) {
    await client.close().catch(() => undefined); // a name clash, a `rerunSafe` or `parallelSafe` that threw: nothing is left running
    throw error;
  }

  let closing: Promise<void> | undefined;
  return {
    tools,
    get client() {
      return link.current;
    },
    close: () => (closing ??= link.close()),
  };
}

/** An MCP server's connection, made again when it drops: see {@link reconnecting}. */
interface McpLink {
  /** The client now (a dropped one until a call reconnects). */
  readonly current: Client;
  /** Why the current connection dropped, if it did: the last error the transport reported, if any. */
  readonly dropped: string | undefined;
  /** A connected client: the current one, or after a drop a new connection, one attempt shared by every call that asks meanwhile. */
  connected(): Promise<Client>;
  /** Closes the current client; every later `connected()` fails. */
  close(): Promise<void>;
}

/**
 * Keeps `first` as the current client until it drops (its transport closed: the server exited,
 * or a message broke the stream), then `open`s a new one on demand: a failed attempt fails the
 * calls that waited for it, and the next call tries again.
 */
function reconnecting(first: Client, label: string, open: () => Promise<Client>): McpLink {
  let current = first;
  let dropped: string | undefined;
  let lastError: string | undefined;
  let opening: Promise<Client> | undefined;
  let closed = false;
  const watch = (client: Client): void => {
    client.onerror = (error) => {
      if (client === current) lastError = errorText(error);
    };
    client.onclose = () => {
      if (client === current) dropped = lastError ?? 'the server closed it';
    };
  };
  const reopen = async (): Promise<Client> => {
    const reason = dropped;
    let next: Client;
    try {
      next = await open();
    } catch (error) {
      throw new Error(`the MCP server "${label}" dropped its connection (${reason}) and did not reconnect: ${errorText(error)}`, { cause: error });
    }
    if (closed) {
      await next.close().catch(() => undefined);
      throw new Error(`the MCP connection to "${label}" is closed`);
    }
    current = next;
    dropped = undefined;
    lastError = undefined;
    watch(next);
    return next;
  };
  watch(first);
  return {
    get current() {
      return current;
    },
    get dropped() {
      return dropped;
    },
    connected: () => {
      if (closed) return Promise.reject(new Error(`the MCP connection to "${label}" is closed`));
      if (dropped === undefined) return Promise.resolve(current);
      return (opening ??= reopen().finally(() => (opening = undefined)));
    },
    close: () => {
      closed = true;
      return current.close();
    },
  };
}

/**
 * What a failed `tools/call` ends its call with: an answer over `maxResultBytes` as "tool result
 * too large", a dropped connection saying why and that the next call reconnects, any other as it is.
 */
function callFailure(error: unknown, toolName: string, link: McpLink): unknown {
  if (!(error instanceof McpError)) return error;
  if (error.code === MCP_MESSAGE_TOO_LARGE) {
    const { bytes, maxBytes } = (error.data ?? {}) as { bytes?: number; maxBytes?: number };
    return resultTooLarge(`MCP tool "${toolName}"`, bytes ?? 'more', maxBytes ?? Number.NaN);
  }
  if (error.code === ErrorCode.ConnectionClosed && link.dropped !== undefined) {
    return new Error(`the MCP server's connection dropped during the call (${link.dropped}); the next call reconnects`);
  }
  return error;
}

/** The default of `parallelSafe`: a tool the server says only reads (its `readOnlyHint`, a hint like every annotation). */
const readOnly = (tool: McpToolInfo): boolean => tool.annotations?.readOnlyHint === true;

/** Opens a progress route: its token for a request's `_meta`, and `done(token)` to close it. */
interface ProgressRoutes {
  (onProgress: (progress: Progress) => void): string;
  done(token: string): void;
  /** Routes a client's progress notifications (each client of a connection that reconnects). */
  install(client: Client): void;
}

/**
 * Routes the client's progress notifications by token, ours first. The SDK's own `onprogress`
 * forgets a request's token the moment its response arrives, while notifications are handled a
 * microtask late: a progress notification that arrives with the response (the last step's,
 * typically) is dropped (modelcontextprotocol/typescript-sdk#2580). Our tokens stay open until
 * `done`. Tokens that are not ours go to the SDK's handler, so `client.callTool(..., {onprogress})`
 * still works for callers of the raw client.
 */
function progressRoutes(): ProgressRoutes {
  const routes = new Map<string, (progress: Progress) => void>();
  let next = 0;
  const install = (client: Client): void => {
    const sdkHandler = (client as unknown as { _onprogress?: (n: ProgressNotification) => void })._onprogress?.bind(client);
    client.setNotificationHandler(ProgressNotificationSchema, (notification) => {
      const { progressToken, ...progress } = notification.params;
      const route = routes.get(String(progressToken));
      if (route !== undefined) route(progress);
      else sdkHandler?.(notification);
    });
  };
  const open = (onProgress: (progress: Progress) => void): string => {
    const token = `runestream-${++next}`;
    routes.set(token, onProgress);
    return token;
  };
  return Object.assign(open, { done: (token: string) => void routes.delete(token), install });
}

/** The longest tool name model APIs accept (what `checkToolName` allows). */
const MAX_TOOL_NAME_LENGTH = 64;

/** The tool's name for the model: prefixed, what model APIs refuse turned into `_`, and past 64 characters cut (ending `_` and a hash of the whole). */
function exposedName(prefix: string | undefined, mcpName: string): string {
  const full = prefix === undefined ? mcpName : `${prefix}__${mcpName}`;
  return shortened(full.replace(/[^A-Za-z0-9_-]/g, '_'), MAX_TOOL_NAME_LENGTH, '_');
}

/** Checks arguments against an MCP tool's input schema; compiled on first use. */
function argumentsCheck(validator: AjvJsonSchemaValidator, info: McpToolInfo): (args: unknown) => ToolInputCheck<McpArguments> {
  let validate: ((input: unknown) => { valid: boolean; errorMessage?: string | undefined }) | null | undefined;
  return (args) => {
    const input = args === null || args === undefined ? {} : args;
    if (typeof input !== 'object' || Array.isArray(input)) {
      return { ok: false, error: `(root): MCP tool arguments must be a JSON object, got ${Array.isArray(input) ? 'an array' : typeof input}` };
    }
    if (validate === undefined) {
      try {
        validate = validator.getValidator(info.inputSchema as Parameters<AjvJsonSchemaValidator['getValidator']>[0]);
      } catch {
        validate = null; // a schema AJV cannot compile: the server validates
      }
    }
    const result = validate?.(input);
    if (result !== undefined && !result.valid) return { ok: false, error: fieldsOf(result.errorMessage ?? '(root): does not match the input schema') };
    return { ok: true, input: input as McpArguments };
  };
}

/**
 * AJV's message in `describeIssues`'s shape: `data/a must be number, data must have required
 * property 'b'` becomes `a: must be number; (root): must have required property 'b'`.
 */
function fieldsOf(ajvMessage: string): string {
  return ajvMessage.replace(/(^|, )data(\/\S*)? /g, (_, separator: string, path: string | undefined) => {
    const field = path === undefined ? '(root)' : path.slice(1).replace(/\//g, '.');
    return `${separator === '' ? '' : '; '}${field}: `;
  });
}

/** One progress notification as a chunk: its message, else "progress/total", else the progress. */
function progressChunk(p: Progress): string {
  if (p.message !== undefined && p.message !== '') return p.message;
  return p.total === undefined ? String(p.progress) : `${p.progress}/${p.total}`;
}

/** The text parts of a result, joined by newlines. */
function textOf(result: CallToolResult): string {
  return (result.content ?? [])
    .filter((part): part is Extract<typeof part, { type: 'text' }> => part.type === 'text')
    .map((part) => part.text)
    .join('\n');
}

/** A successful result as the call's output: structured content, else all-text content as a string, else the parts. */
function outputOf(result: CallToolResult): unknown {
  if (result.structuredContent !== undefined) return result.structuredContent;
  const content = result.content ?? [];
  return content.every((part) => part.type === 'text') ? textOf(result) : content;
}
