import type { Attributes } from '@opentelemetry/api';

/**
 * The names runestream's spans carry: OpenTelemetry's GenAI semantic conventions (status
 * "Development", https://opentelemetry.io/docs/specs/semconv/gen-ai/) where they name a thing,
 * and `runestream.*` for what is the engine's own. One table, so the README's and the code's agree.
 */
export const GEN_AI = {
  operation: 'gen_ai.operation.name',
  provider: 'gen_ai.provider.name',
  requestModel: 'gen_ai.request.model',
  responseModel: 'gen_ai.response.model',
  finishReasons: 'gen_ai.response.finish_reasons',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  /** Seconds from the model call's start to its first text delta (ours: the conventions have it only as a metric). */
  timeToFirstChunk: 'gen_ai.response.time_to_first_chunk',
  agentId: 'gen_ai.agent.id',
  agentName: 'gen_ai.agent.name',
  conversationId: 'gen_ai.conversation.id',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolType: 'gen_ai.tool.type',
  /** Opt-in content (`captureContent`). */
  inputMessages: 'gen_ai.input.messages',
  outputMessages: 'gen_ai.output.messages',
  toolArguments: 'gen_ai.tool.call.arguments',
  toolResult: 'gen_ai.tool.call.result',
  errorType: 'error.type',
  stream: 'runestream.stream',
  turn: 'runestream.turn',
  /** The calls of a tool round, on its `turn.tool_calls_received` and `turn.tools_finished` events. */
  callIds: 'runestream.tool.call_ids',
  outcome: 'runestream.outcome',
  /** A span rebuilt from the log, for a run that started before this process took its stream on. */
  replayed: 'runestream.span.replayed',
  /** A span ended early: `evicted` (past `maxOpenSpans`) or `unfinished` (the engine closed under it). */
  cutShort: 'runestream.span.cut_short',
} as const;

/** The event on a `chat` span at its first text delta. */
export const FIRST_CHUNK_EVENT = 'gen_ai.first_chunk';

/** The finish reasons of the conventions' output messages, by the turn event that ended the response. */
export const FINISH_REASON = { toolCalls: 'tool_call', stop: 'stop' } as const;

/**
 * The conventions' `gen_ai.provider.name` of an AI SDK provider id: the id up to its first dot
 * (`openai.chat` -> `openai`, `anthropic.messages` -> `anthropic`), which is the conventions'
 * name for the big providers.
 */
export const providerName = (provider: string): string => {
  const dot = provider.indexOf('.');
  return dot > 0 ? provider.slice(0, dot) : provider;
};

/** A message part of the conventions' content capture. */
type MessagePart = { type: 'text'; content: string } | { type: 'tool_call'; id: string; name: string; arguments: unknown };

/** `gen_ai.input.messages` of a turn: the user's input, in the conventions' JSON form. */
export const userMessages = (text: string): string => JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: text }] }]);

/** `gen_ai.output.messages`: the assistant's text and the tools it called, in the conventions' JSON form. */
export function assistantMessages(text: string, calls: readonly { callId: string; toolName: string; arguments: unknown }[], finishReason: string): string {
  const parts: MessagePart[] = text === '' ? [] : [{ type: 'text', content: text }];
  for (const call of calls) parts.push({ type: 'tool_call', id: call.callId, name: call.toolName, arguments: call.arguments });
  return JSON.stringify([{ role: 'assistant', parts, finish_reason: finishReason }]);
}

/** `gen_ai.usage.*` of a usage record (`{ inputTokens, outputTokens }`), each only when it is a count. */
export function usageAttributes(usage: unknown): Attributes {
  const { inputTokens, outputTokens } = (usage ?? {}) as { inputTokens?: unknown; outputTokens?: unknown };
  const attributes: Attributes = {};
  if (typeof inputTokens === 'number' && Number.isFinite(inputTokens)) attributes[GEN_AI.inputTokens] = inputTokens;
  if (typeof outputTokens === 'number' && Number.isFinite(outputTokens)) attributes[GEN_AI.outputTokens] = outputTokens;
  return attributes;
}
