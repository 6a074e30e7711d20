import { z } from 'zod';
import type { AgentState } from './state.js';

/**
 * An effect the ReAct loop needs running, as data (the Moorex model: effects are derived from state).
 * - `call-llm`: ask the LLM to continue the loop. It answers every user message and tool result up
 *   to `answersTo`; report that value as the `calledLlmAt` of the `re-act-observed` it dispatches.
 * - `call-tool`: run one external tool call and dispatch its `tool-call-completed`.
 */
export const ReactAgentEffect = z.discriminatedUnion('type', [
  z.object({ type: z.literal('call-llm'), answersTo: z.number() }),
  z.object({ type: z.literal('call-tool'), toolCallId: z.string(), name: z.string(), parameters: z.string() }),
]);
export type ReactAgentEffect = z.infer<typeof ReactAgentEffect>;

/**
 * The effects due in a state, by key, for `createMoorex`'s `effectsAt`. Outside a ReAct loop nothing is due.
 *
 * 1. `call-tool:<toolCallId>` for each tool call of the loop that has no result yet.
 * 2. `call-llm:<calledLlmAt>` when a user message or a result of the loop's tool calls is newer than
 *    `calledLlmAt`, and no tool call of the loop is still in flight: the LLM's context gives every
 *    tool call its result (the seed's standard tool-call format), so it waits for the last one.
 *
 * Keys are stable while the effect is due: a tool call's key holds until its result arrives, and the
 * LLM call's key holds until an observation moves `calledLlmAt` (a message arriving meanwhile is
 * answered by the next call, under the next key).
 *
 * @example
 * ```ts
 * import { agentTransition, initialAgentState, reactAgentEffectsAt } from 'runestream';
 * const s = agentTransition({ type: 'user-message-received', messageId: 'm1', content: 'Hi', timestamp: 5 })(initialAgentState());
 * console.log(reactAgentEffectsAt(s)); // Logs: { 'call-llm:0': { type: 'call-llm', answersTo: 5 } }
 * ```
 */
export function reactAgentEffectsAt(state: AgentState): Record<string, ReactAgentEffect> {
  const context = state.reActContext;
  if (context === null) return {};
  const effects: Record<string, ReactAgentEffect> = {};
  let inFlight = false;
  let answersTo = newestUserMessageAt(state);
  for (const toolCallId of context.toolCallIds) {
    const call = state.toolCalls[toolCallId];
    if (call === undefined) continue; // the transition only lets known ids into the context
    if (call.result === null) {
      inFlight = true;
      effects[`call-tool:${toolCallId}`] = { type: 'call-tool', toolCallId, name: call.name, parameters: call.parameters };
    } else {
      answersTo = Math.max(answersTo, call.result.receivedAt);
    }
  }
  if (!inFlight && answersTo > state.calledLlmAt) {
    effects[`call-llm:${state.calledLlmAt}`] = { type: 'call-llm', answersTo };
  }
  return effects;
}

/** The timestamp of the newest user message, or -Infinity. Messages are in timestamp order. */
function newestUserMessageAt(state: AgentState): number {
  for (let i = state.messages.length - 1; i >= 0; i--) {
    const message = state.messages[i]!;
    if (message.role === 'user') return message.timestamp;
  }
  return -Infinity;
}
