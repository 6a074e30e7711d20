import { z } from 'zod';
import type { AgentInput } from '../../reducers/react-agent/input.js';
import type { AgentState } from '../../reducers/react-agent/state.js';
import type { AgentInputOutcome } from '../../reducers/react-agent/transition.js';
import type { ToolSpec } from '../llm/model-types.js';
import { defineTool, type AnyTool } from '../tools/tool.js';
import { toolRegistry } from '../tools/tool-registry.js';
import { toolSpecs } from '../tools/tool-specs.js';

/** The most tool calls one `query_tool_calls` lists, and one `load_tool_call_results` adds. */
export const MAX_INTERNAL_LIST = 50;
/** The longest parameters text `query_tool_calls` shows of a call. */
const MAX_PARAMETERS_SHOWN = 300;

const internalOnly = (): never => {
  throw new Error('an internal tool runs inside a model call, against the agent state');
};

/**
 * Seed 004's internal tools: no configuration, offered to the model in every call of the ReAct
 * loop, answered here from the agent's state. Their calls are never recorded in `toolCalls`.
 */
const INTERNAL_TOOLS: readonly AnyTool[] = [
  defineTool({
    name: 'load_older_messages',
    description: 'Loads older messages of this chat into your context (the oldest ones are left out at first).',
    inputSchema: z.object({}),
    execute: internalOnly,
  }),
  defineTool({
    name: 'query_tool_calls',
    description: 'Lists earlier tool calls that are not in your context, newest first: id, tool name, parameters, time, status. Load a result with load_tool_call_results.',
    inputSchema: z.object({
      name: z.string().max(200).optional().describe('only calls of this tool'),
      limit: z.number().int().min(1).max(MAX_INTERNAL_LIST).optional().describe(`how many, at most (default 20, at most ${MAX_INTERNAL_LIST})`),
    }),
    execute: internalOnly,
  }),
  defineTool({
    name: 'load_tool_call_results',
    description: 'Loads earlier tool calls, with their results, into your context, by id (see query_tool_calls).',
    inputSchema: z.object({ toolCallIds: z.array(z.string().min(1).max(200)).min(1).max(MAX_INTERNAL_LIST) }),
    execute: internalOnly,
  }),
];

const registry = toolRegistry('react agent internal tools', INTERNAL_TOOLS);

/** The internal tools as the model sees them. */
export const INTERNAL_TOOL_SPECS: Readonly<Record<string, ToolSpec>> = toolSpecs(INTERNAL_TOOLS);

/** Whether `name` is an internal tool's. */
export const isInternalTool = (name: string): boolean => Object.hasOwn(INTERNAL_TOOL_SPECS, name);

/** Throws naming an external tool whose name an internal tool has. */
export function checkNoInternalNames(who: string, tools: readonly AnyTool[]): void {
  for (const tool of tools) {
    if (isInternalTool(tool.name)) throw new TypeError(`${who}: tool name "${tool.name}" is taken by an internal tool of the ReAct agent; rename the tool`);
  }
}

/** What one internal tool call did: the input it dispatches (if any), the state after it, and the model's answer. */
export interface InternalToolOutcome {
  readonly input?: AgentInput;
  readonly state: AgentState;
  readonly isError: boolean;
  readonly text: string;
}

/**
 * Runs one internal tool call against `state`; `apply` is the agent's transition (so the answer
 * says what the agent's own rules said).
 *
 * - `load_older_messages`: `context-window-expanded`.
 * - `load_tool_call_results`: `history-tool-calls-added`.
 * - `query_tool_calls`: nothing to dispatch; the answer is the list.
 */
export function runInternalTool(
  call: { readonly toolName: string; readonly input: unknown },
  state: AgentState,
  timestamp: number,
  apply: (input: AgentInput, state: AgentState) => AgentInputOutcome,
): InternalToolOutcome {
  const resolved = registry.resolve({ toolName: call.toolName, arguments: call.input as never });
  if (!resolved.ok) return { state, isError: true, text: resolved.error };
  const fromInput = (input: AgentInput, done: (next: AgentState) => string): InternalToolOutcome => {
    const outcome = apply(input, state);
    return outcome.applied ? { input, state: outcome.state, isError: false, text: done(outcome.state) } : { state, isError: true, text: outcome.reason };
  };
  switch (call.toolName) {
    case 'load_older_messages':
      return fromInput({ type: 'context-window-expanded', timestamp }, (next) => {
        const size = next.reActContext?.contextWindowSize ?? next.messages.length;
        return `Your context now has the last ${size} of ${next.messages.length} messages.`;
      });
    case 'load_tool_call_results': {
      const { toolCallIds } = resolved.input as { toolCallIds: string[] };
      return fromInput({ type: 'history-tool-calls-added', toolCallIds, timestamp }, () => `Loaded ${toolCallIds.length} tool call(s) with their results into your context.`);
    }
    default: {
      const { name, limit = 20 } = resolved.input as { name?: string; limit?: number };
      const inContext = new Set(state.reActContext?.toolCallIds ?? []);
      const calls = Object.entries(state.toolCalls)
        .filter(([id, call]) => !inContext.has(id) && (name === undefined || call.name === name))
        .sort(([, a], [, b]) => b.calledAt - a.calledAt)
        .slice(0, limit)
        .map(([toolCallId, call]) => ({
          toolCallId,
          name: call.name,
          parameters: call.parameters.length > MAX_PARAMETERS_SHOWN ? `${call.parameters.slice(0, MAX_PARAMETERS_SHOWN - 1)}…` : call.parameters,
          calledAt: call.calledAt,
          status: call.result === null ? 'pending' : call.result.isSuccess ? 'success' : 'error',
        }));
      return { state, isError: false, text: JSON.stringify(calls) };
    }
  }
}
