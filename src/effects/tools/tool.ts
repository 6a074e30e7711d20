import type { JSONSchema7 } from 'ai';
import { z } from 'zod';
import { describeIssues } from '../../reducers/validate.js';
import { errorText } from '../../reducers/error-text.js';
import { DEFAULT_MAX_TOOL_RESULT_BYTES, checkMaxResultBytes } from './tool-result-limits.js';

/** What a running tool gets besides its input. */
export interface ToolExecutionContext {
  /**
   * Aborted when the call stops mattering: it timed out (`execution_timeout`), it was cancelled
   * (a `cancelled` rune), or the engine closed. Its `reason` says which. Pass it on to `fetch`,
   * child processes, MCP calls.
   */
  readonly signal: AbortSignal;
  /** Reports a chunk of progress (a line of output, "3 of 10"): one `progress_update` rune each. */
  progress(chunk: string): void;
}

/** The outcome of checking a model's arguments against a tool's input schema. */
export type ToolInputCheck<Input> = { readonly ok: true; readonly input: Input } | { readonly ok: false; readonly error: string };

/**
 * A tool the model may call, as the tool-call effects run it. Make one with {@link defineTool}
 * (a zod input schema) or get them from an MCP server with `connectMcp`.
 */
export interface Tool<Input = unknown, Output = unknown> {
  /** What the model calls it: letters, digits, `_` and `-`, at most 64 (what OpenAI-style APIs accept). */
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the input, an object schema: what the model sees (see `toolSpecs`). */
  readonly inputSchema: JSONSchema7;
  /** Checks the model's arguments: the input to run with, or an error naming each failing field. */
  parseInput(args: unknown): ToolInputCheck<Input>;
  /** Whether this call waits for a person's approval before it runs. */
  needsApproval(input: Input): boolean;
  /** How long one execution may run before it ends with `execution_timeout`, in scheduler ms. */
  readonly timeoutMs: number;
  /**
   * The largest output a call may end with, in bytes: a string's UTF-8, any other value's JSON.
   * Past it the call ends with `execution_error` "tool result too large: ... (maxResultBytes)".
   * Absent: 1,000,000 (`DEFAULT_MAX_TOOL_RESULT_BYTES`). An MCP tool's is also the cap on each message
   * its server sends, enforced while it is read (see `connectMcp`).
   */
  readonly maxResultBytes?: number;
  /** Whether a call left executing by a crash may run again after a restart (else it is interrupted). */
  readonly rerunSafe: boolean;
  /**
   * Whether its calls may run beside the other calls of their round (seed 003: "Parallel-safe
   * tools run concurrently"). Calls of a tool that is not run one at a time, in call order.
   */
  readonly parallelSafe: boolean;
  /** Runs the tool once. Its output becomes the call's `success{output}`, a thrown error its `execution_error`. */
  execute(input: Input, context: ToolExecutionContext): Output | PromiseLike<Output>;
}

/** Any tool, whatever its input and output types: what lists of tools hold. */
// `any`, not `unknown`: a Tool<{ path: string }> must fit in a list of tools, and its input is contravariant.
export type AnyTool = Tool<any, any>;

/** Options of {@link defineTool}, with their defaults. */
export interface DefineToolOptions<Schema extends z.ZodType, Output> {
  /** What the model calls it: `^[A-Za-z0-9_-]{1,64}$`. */
  name: string;
  /** What it does, for the model: when to call it and what it returns. */
  description: string;
  /** The input's zod schema; its JSON Schema (zod's own converter) is what the model sees. Must describe an object. */
  inputSchema: Schema;
  /** Runs the tool; may return a value or a promise. Honour `signal`; report progress with `progress(chunk)`. */
  execute(input: z.output<Schema>, context: ToolExecutionContext): Output | PromiseLike<Output>;
  /** Whether a call waits for approval: a boolean or a function of the parsed input. Default `false`. */
  needsApproval?: boolean | ((input: z.output<Schema>) => boolean);
  /** Longest run before `execution_timeout` (and the signal aborts), in scheduler ms; `Infinity` for none. Default 60,000. */
  timeoutMs?: number;
  /**
   * The largest output a call may end with, in bytes (a string's UTF-8, any other value's JSON);
   * past it the call ends with `execution_error` "tool result too large: ... (maxResultBytes)",
   * which the model reads. A positive integer, or `Infinity`. Default 1,000,000.
   */
  maxResultBytes?: number;
  /**
   * Whether a call left `executing` by a crash may simply run again after a restart (a read, an
   * idempotent write). Default `false`: such a call ends with "interrupted by restart" instead.
   */
  rerunSafe?: boolean;
  /**
   * Whether its calls may run beside the other calls of the same model answer (a read, a pure
   * computation). Default `false`: a tool is not assumed safe to overlap, so its calls run one at a
   * time, in the order the model asked for them.
   */
  parallelSafe?: boolean;
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Checks a tool name against what OpenAI-style APIs accept; `who` names the caller in the error. */
export function checkToolName(who: string, name: string): void {
  if (typeof name !== 'string' || !TOOL_NAME.test(name)) {
    throw new TypeError(`${who}: tool name ${JSON.stringify(name)} must match ${String(TOOL_NAME)} (what model APIs accept)`);
  }
}

/**
 * Defines a tool from a zod input schema.
 *
 * 1. Its JSON Schema is computed once, by `z.toJSONSchema` (draft-07, the input side of the
 *    schema, no `$ref`s): it must be an object schema, as model APIs require, else this throws
 *    naming the tool. So does a schema zod cannot represent (a `z.date()`, say).
 * 2. `parseInput` runs the zod schema: the parsed input (defaults applied), or an error naming
 *    each failing field (`path: expected string, received number`).
 * 3. `needsApproval`, `timeoutMs`, `maxResultBytes`, `rerunSafe`, `parallelSafe` get their
 *    defaults (`false`, 60,000, 1,000,000, `false`, `false`).
 *
 * ## Example
 * ```ts
 * import { z } from 'zod';
 * import { defineTool } from 'runestream/agents';
 * const readFile = defineTool({
 *   name: 'read_file',
 *   description: 'Reads a UTF-8 text file.',
 *   inputSchema: z.object({ path: z.string() }),
 *   execute: ({ path }, { signal }) => import('node:fs/promises').then((fs) => fs.readFile(path, { encoding: 'utf8', signal })),
 *   rerunSafe: true, // a read may run again after a crash
 *   parallelSafe: true, // and may run beside other calls
 * });
 * console.log(readFile.parseInput({ path: 3 }));
 * // Logs: { ok: false, error: 'path: Invalid input: expected string, received number' }
 * ```
 *
 * @see toolSpecs for what the model sees, and toolCallEffects for what runs it.
 */
export function defineTool<Schema extends z.ZodType, Output>(options: DefineToolOptions<Schema, Output>): Tool<z.output<Schema>, Output> {
  const {
    name,
    description,
    inputSchema,
    execute,
    needsApproval = false,
    timeoutMs = 60_000,
    maxResultBytes = DEFAULT_MAX_TOOL_RESULT_BYTES,
    rerunSafe = false,
    parallelSafe = false,
  } = options;
  checkToolName('defineTool', name);
  if (typeof description !== 'string') throw new TypeError(`defineTool: tool "${name}" needs a "description" string`);
  if (!(inputSchema instanceof z.ZodType)) throw new TypeError(`defineTool: tool "${name}" needs a zod "inputSchema"`);
  if (typeof execute !== 'function') throw new TypeError(`defineTool: tool "${name}" needs an "execute" function`);
  if (!(timeoutMs > 0)) throw new TypeError(`defineTool: tool "${name}": "timeoutMs" must be positive (Infinity for none), got ${String(timeoutMs)}`);
  checkMaxResultBytes(`defineTool: tool "${name}"`, maxResultBytes);
  if (typeof needsApproval !== 'boolean' && typeof needsApproval !== 'function') {
    throw new TypeError(`defineTool: tool "${name}": "needsApproval" must be a boolean or a function of the input`);
  }
  if (typeof parallelSafe !== 'boolean') throw new TypeError(`defineTool: tool "${name}": "parallelSafe" must be a boolean, got ${typeof parallelSafe}`);
  return {
    name,
    description,
    inputSchema: objectJsonSchema(name, inputSchema),
    parseInput(args) {
      const parsed = inputSchema.safeParse(args);
      return parsed.success ? { ok: true, input: parsed.data } : { ok: false, error: describeIssues(parsed.error.issues) };
    },
    needsApproval: typeof needsApproval === 'function' ? needsApproval : () => needsApproval,
    timeoutMs,
    maxResultBytes,
    rerunSafe,
    parallelSafe,
    execute,
  };
}

/** The JSON Schema the model sees, as the AI SDK converts zod 4 schemas; refused unless it is an object schema. */
function objectJsonSchema(name: string, schema: z.ZodType): JSONSchema7 {
  let json: Record<string, unknown>;
  try {
    json = z.toJSONSchema(schema, { target: 'draft-7', io: 'input', reused: 'inline' }) as Record<string, unknown>;
  } catch (error) {
    throw new TypeError(`defineTool: tool "${name}": its inputSchema has no JSON Schema: ${errorText(error)}`);
  }
  if (json.type !== 'object') {
    throw new TypeError(
      `defineTool: tool "${name}": inputSchema must be an object schema (z.object({...})), as model APIs require; got JSON Schema type ${JSON.stringify(json.type ?? null)}`,
    );
  }
  return json as JSONSchema7;
}
