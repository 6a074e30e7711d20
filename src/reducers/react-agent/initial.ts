import type { AgentState, ToolDefinition } from './state.js';

/**
 * A fresh agent: no messages, no tool calls, no ReAct loop, the given external tools.
 * Timestamps start at 0, so any input with a positive timestamp applies (no clock is read).
 *
 * @example
 * ```ts
 * import { initialAgentState } from 'runestream';
 * console.log(initialAgentState());
 * // Logs: { updatedAt: 0, messages: [], tools: {}, toolCalls: {}, calledLlmAt: 0, reActContext: null }
 * ```
 */
export function initialAgentState(options: { tools?: Record<string, ToolDefinition> } = {}): AgentState {
  return { updatedAt: 0, messages: [], tools: options.tools ?? {}, toolCalls: {}, calledLlmAt: 0, reActContext: null };
}
