import type { ToolCallInput } from '../../reducers/tool-call/schema.js';
import { errorText } from '../../reducers/error-text.js';
import type { AnyTool } from './tool.js';

/** A call matched to its tool: the tool and its parsed input, or why it cannot run. */
export type ResolvedCall = { readonly ok: true; readonly tool: AnyTool; readonly input: unknown } | { readonly ok: false; readonly error: string };

/** The tools of one `toolCallEffects`, by name: those it was made with, and those added while it runs. */
export interface ToolRegistry {
  get(name: string): AnyTool | undefined;
  /**
   * The call's tool and parsed input; or an error naming the unknown tool (and the known ones), or
   * the arguments' failing fields. What ends a call that cannot run with `execution_error`.
   */
  resolve(call: Pick<ToolCallInput, 'toolName' | 'arguments'>): ResolvedCall;
  /** Whether a call left executing by a crash runs again: its tool is `rerunSafe` and its arguments are valid. */
  rerunSafe(call: Pick<ToolCallInput, 'toolName' | 'arguments'>): boolean;
  /** Whether calls of `toolName` may run beside others: its tool says so. An unknown tool is not assumed safe. */
  parallelSafe(toolName: string): boolean;
  /** Why `tools` cannot be added (the first whose name another tool has), or `undefined`. A tool already there, the same object, is no clash. */
  clash(tools: readonly AnyTool[]): string | undefined;
  /**
   * Adds tools while calls run (an agent definition made live): from now on calls may name them.
   * A tool already there (the same object) is shared, and stays until each adder removed it.
   * Throws {@link ToolNameClashError} (adding none) if another tool has one of their names.
   */
  add(tools: readonly AnyTool[]): void;
  /** Removes tools that {@link ToolRegistry.add} added (once per add); calls naming them then fail as unknown. */
  remove(tools: readonly AnyTool[]): void;
}

/** Tools refused by {@link ToolRegistry.add}: another tool has one of their names. */
export class ToolNameClashError extends Error {
  override readonly name = 'ToolNameClashError';
  readonly code = 'tool_name_clash';
}

/** Indexes tools by name; throws naming a name two tools share. Tools may be added and removed later. */
export function toolRegistry(who: string, tools: readonly AnyTool[]): ToolRegistry {
  if (!Array.isArray(tools)) throw new TypeError(`${who}: "tools" must be an array of tools (defineTool, connectMcp)`);
  const byName = new Map<string, { readonly tool: AnyTool; holders: number }>();
  for (const tool of tools) {
    if (byName.has(tool.name)) throw new TypeError(`${who}: two tools are named "${tool.name}"; tool names must be unique`);
    byName.set(tool.name, { tool, holders: 1 });
  }
  const get = (name: string): AnyTool | undefined => byName.get(name)?.tool;
  const known = (): string => (byName.size === 0 ? 'none' : [...byName.keys()].map((n) => `"${n}"`).join(', '));
  const resolve = (call: Pick<ToolCallInput, 'toolName' | 'arguments'>): ResolvedCall => {
    const tool = get(call.toolName);
    if (tool === undefined) return { ok: false, error: `unknown tool "${call.toolName}"; the known tools are: ${known()}` };
    let check;
    try {
      check = tool.parseInput(call.arguments);
    } catch (error) {
      return { ok: false, error: `the arguments of tool "${tool.name}" could not be checked: ${errorText(error)}` };
    }
    if (!check.ok) return { ok: false, error: `invalid arguments for tool "${tool.name}": ${check.error}` };
    return { ok: true, tool, input: check.input };
  };
  const clash = (added: readonly AnyTool[]): string | undefined => {
    const seen = new Map<string, AnyTool>();
    for (const tool of added) {
      const other = seen.get(tool.name) ?? get(tool.name);
      if (other !== undefined && other !== tool) return `a different tool is already named "${tool.name}"; tool names must be unique`;
      seen.set(tool.name, tool);
    }
    return undefined;
  };
  return {
    get,
    resolve,
    rerunSafe: (call) => get(call.toolName)?.rerunSafe === true && resolve(call).ok,
    parallelSafe: (toolName) => get(toolName)?.parallelSafe === true,
    clash,
    add: (added) => {
      const why = clash(added);
      if (why !== undefined) throw new ToolNameClashError(`${who}: ${why}`);
      for (const tool of new Set(added)) {
        const entry = byName.get(tool.name);
        if (entry === undefined) byName.set(tool.name, { tool, holders: 1 });
        else entry.holders++;
      }
    },
    remove: (removed) => {
      for (const tool of new Set(removed)) {
        const entry = byName.get(tool.name);
        if (entry === undefined || entry.tool !== tool) continue;
        if (--entry.holders === 0) byName.delete(tool.name);
      }
    },
  };
}
