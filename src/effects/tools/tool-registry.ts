import type { ToolCallInput } from '../../reducers/tool-call/schema.js';
import { errorText } from '../../reducers/error-text.js';
import type { AnyTool } from './tool.js';

/** A call matched to its tool: the tool and its parsed input, or why it cannot run. */
export type ResolvedCall = { readonly ok: true; readonly tool: AnyTool; readonly input: unknown } | { readonly ok: false; readonly error: string };

/** The tools of one `toolCallEffects`, by name. */
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
}

/** Indexes tools by name; throws naming a name two tools share. */
export function toolRegistry(who: string, tools: readonly AnyTool[]): ToolRegistry {
  if (!Array.isArray(tools)) throw new TypeError(`${who}: "tools" must be an array of tools (defineTool, connectMcp)`);
  const byName = new Map<string, AnyTool>();
  for (const tool of tools) {
    if (byName.has(tool.name)) throw new TypeError(`${who}: two tools are named "${tool.name}"; tool names must be unique`);
    byName.set(tool.name, tool);
  }
  const known = (): string => (byName.size === 0 ? 'none' : [...byName.keys()].map((n) => `"${n}"`).join(', '));
  const resolve = (call: Pick<ToolCallInput, 'toolName' | 'arguments'>): ResolvedCall => {
    const tool = byName.get(call.toolName);
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
  return {
    get: (name) => byName.get(name),
    resolve,
    rerunSafe: (call) => byName.get(call.toolName)?.rerunSafe === true && resolve(call).ok,
    parallelSafe: (toolName) => byName.get(toolName)?.parallelSafe === true,
  };
}
