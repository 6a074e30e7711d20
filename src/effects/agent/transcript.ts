import type { AssistantContent, JSONValue, ModelMessage, ToolResultPart } from 'ai';
import type { RuneOf } from '../../reducers/rune.js';
import type { ToolCallInput, ToolCallState } from '../../reducers/tool-call/schema.js';
import type { turnEngine } from '../../reducers/turn-engine/machine.js';

/** What a call's state tells the model: its result, or why there is none. */
export function toolResultOutput(call: ToolCallState | undefined): ToolResultPart['output'] {
  switch (call?.value) {
    case 'completed_result':
      return { type: 'json', value: (call.output ?? null) as JSONValue };
    case 'error_result':
      return { type: 'error-text', value: call.error ?? 'the tool failed' };
    case 'timeout_result':
      return { type: 'error-text', value: call.error ?? 'the tool timed out' };
    case 'denied':
      return { type: 'execution-denied', ...(call.reason === undefined ? {} : { reason: call.reason }) };
    case 'cancelled_result':
      return { type: 'error-text', value: `cancelled${call.reason ? `: ${call.reason}` : ''}` };
    default:
      // Never an orphan call in a prompt: one with no result yet is shown as cancelled.
      return { type: 'error-text', value: 'cancelled: no result' };
  }
}

/**
 * An agent's conversation as model messages, folded from its turn stream's runes and its calls'
 * states: each `start_turn` is a user message; the deltas of each model response an assistant
 * message, with the tool calls it asked for; each tool round a tool message with every call's
 * result. A response cut short (interrupt, steer, error) keeps the text it had.
 *
 * @param runes The turn stream's runes, in seq order.
 * @param calls Each call's state by callId (a call with no state is shown as cancelled).
 */
export function transcriptOf(runes: readonly RuneOf<typeof turnEngine>[], calls: ReadonlyMap<string, ToolCallState>): ModelMessage[] {
  const messages: ModelMessage[] = [];
  let text = '';
  const flushText = (): void => {
    if (text !== '') messages.push({ role: 'assistant', content: text });
    text = '';
  };
  for (const rune of runes) {
    const { event } = rune;
    switch (event.type) {
      case 'start_turn':
        flushText();
        messages.push({ role: 'user', content: event.input });
        break;
      case 'assistant_delta':
        text += event.content;
        break;
      case 'tool_calls_received': {
        const asked: readonly ToolCallInput[] =
          event.calls ?? event.callIds.map((callId) => ({ callId, toolName: calls.get(callId)?.toolName ?? 'unknown', arguments: null }));
        const content: Exclude<AssistantContent, string> = text === '' ? [] : [{ type: 'text', text }];
        text = '';
        for (const call of asked) content.push({ type: 'tool-call', toolCallId: call.callId, toolName: call.toolName, input: call.arguments });
        messages.push({ role: 'assistant', content });
        messages.push({
          role: 'tool',
          content: asked.map((call) => ({ type: 'tool-result', toolCallId: call.callId, toolName: call.toolName, output: toolResultOutput(calls.get(call.callId)) })),
        });
        break;
      }
      case 'response_done':
      case 'interrupt':
      case 'steer':
      case 'stream_error':
        flushText();
        break;
      default:
        break;
    }
  }
  flushText();
  return messages;
}
