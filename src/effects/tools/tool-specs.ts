import type { ToolSpec } from '../llm/model-types.js';
import type { AnyTool } from './tool.js';

/**
 * What the model sees of the tools: for each, by name, its description and the JSON Schema of its
 * input (an object schema, from zod's own converter for a {@link defineTool} tool, or as an MCP
 * server lists it). No `execute`: the model's stream stops at the tool call, and the `toolCall`
 * machine owns approval and execution.
 *
 * Throws naming the name when two tools share one: the model could not tell them apart.
 *
 * ## Example
 * ```ts
 * import { z } from 'zod';
 * import { defineTool, toolSpecs } from 'runestream/agents';
 * const add = defineTool({ name: 'add', description: 'Adds two numbers.', inputSchema: z.object({ a: z.number(), b: z.number() }), execute: ({ a, b }) => a + b });
 * console.dir(toolSpecs([add]), { depth: null });
 * // Logs: { add: { description: 'Adds two numbers.', inputSchema: { '$schema': 'http://json-schema.org/draft-07/schema#',
 * //   type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: [ 'a', 'b' ] } } }
 * ```
 *
 * @see defineTool
 */
export function toolSpecs(tools: readonly AnyTool[]): Record<string, ToolSpec> {
  const specs: Record<string, ToolSpec> = {};
  for (const tool of tools) {
    if (Object.hasOwn(specs, tool.name)) throw new TypeError(`toolSpecs: two tools are named "${tool.name}"; tool names must be unique`);
    specs[tool.name] = { description: tool.description, inputSchema: tool.inputSchema };
  }
  return specs;
}
