import { z } from 'zod';
import { defineTool, type AnyTool } from './tool.js';

/** The names of the {@link builtinTools}: what a server configuration's `tools` may name besides its MCP servers. */
export const BUILTIN_TOOL_NAMES = ['clock', 'add', 'save_note'] as const;
export type BuiltinToolName = (typeof BUILTIN_TOOL_NAMES)[number];

/**
 * The built-in tools, harmless, for demos and offline use: `clock` (the date and time, ISO 8601
 * UTC), `add` (two numbers) and `save_note` (which a person must approve). Each call makes fresh
 * tools: `save_note`'s notes are kept by the tools it returns.
 *
 * ## Example
 * ```ts
 * import { builtinTools } from 'runestream/agents';
 * console.log(builtinTools().map((tool) => `${tool.name}${tool.needsApproval({}) ? ' (needs approval)' : ''}`));
 * // Logs: [ 'clock', 'add', 'save_note (needs approval)' ]
 * ```
 */
export function builtinTools(): AnyTool[] {
  const notes: string[] = [];
  const tools: Record<BuiltinToolName, AnyTool> = {
    clock: defineTool({
      name: 'clock',
      description: 'The current date and time (ISO 8601, UTC).',
      inputSchema: z.object({}),
      execute: () => new Date().toISOString(),
    }),
    add: defineTool({
      name: 'add',
      description: 'Adds two numbers.',
      inputSchema: z.object({ a: z.number(), b: z.number() }),
      execute: ({ a, b }) => a + b,
    }),
    save_note: defineTool({
      name: 'save_note',
      description: 'Saves a note for the user. A person must approve it first.',
      inputSchema: z.object({ text: z.string().min(1).max(1000) }),
      needsApproval: true,
      execute: ({ text }) => {
        notes.push(text);
        return { saved: text, notes: notes.length };
      },
    }),
  };
  return BUILTIN_TOOL_NAMES.map((name) => tools[name]);
}
