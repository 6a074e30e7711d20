import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4FunctionTool, LanguageModelV4StreamPart, LanguageModelV4Usage } from '@ai-sdk/provider';
import { AISDKError, StreamProviderError } from 'ai';
import { convertToLanguageModelPrompt, standardizePrompt } from 'ai/internal';
import type { ModelPart, ModelRequest } from './model-types.js';

/*
 * modelCall$ at the provider level: the request as `doStream`'s call options, and the provider's
 * parts as ModelParts, each the way the AI SDK's `streamText` makes them (its behaviour is what
 * modelCall$ documents), without the per-part work of its pipeline. The prompt conversion is the
 * SDK's own, from its `ai/internal` entry: every message shape `streamText` accepts converts alike.
 */

/**
 * `doStream`'s options for a request: the SDK's prompt (system prompt first, then the messages;
 * files a model cannot take by URL are downloaded, as `streamText` does), the tools as function
 * tools with their JSON Schema input, tool choice `auto`. No retries: `doStream` is one attempt.
 */
export async function callOptionsOf(model: LanguageModelV4, request: ModelRequest, abortSignal: AbortSignal): Promise<LanguageModelV4CallOptions> {
  const prompt = await standardizePrompt({ ...(request.system === undefined ? {} : { system: request.system }), messages: [...request.messages] });
  const tools = Object.entries(request.tools).map(
    ([name, spec]): LanguageModelV4FunctionTool => ({ type: 'function', name, description: spec.description, inputSchema: spec.inputSchema }),
  );
  return {
    prompt: await convertToLanguageModelPrompt({ prompt, supportedUrls: await model.supportedUrls, download: undefined, abortSignal, provider: model.provider.split('.')[0] }),
    ...(tools.length === 0 ? {} : { tools }),
    toolChoice: { type: 'auto' },
    abortSignal,
  };
}

/** Rejects keys that would set a prototype, as the SDK's JSON parsing (secure-json-parse) does. */
const secureReviver = (key: string, value: unknown): unknown => {
  if (key === '__proto__' || (key === 'constructor' && typeof value === 'object' && value !== null && 'prototype' in value)) throw new SyntaxError(`forbidden key "${key}"`);
  return value;
};

/** The JSON `text` holds, or `text` itself when it is not JSON. */
const parsedOr = (text: string): unknown => {
  try {
    return JSON.parse(text, secureReviver);
  } catch {
    return text;
  }
};

/**
 * A provider's tool call as a ModelPart: its input (a JSON string) parsed, as `streamText` does.
 * A call to a known tool with no input has `{}`; a call the SDK finds invalid (an unknown tool,
 * input that is not JSON) keeps what parses of it, else the string as it came, for the tool
 * machine to answer with an error the model can read. (The tools' schemas are JSON Schema
 * without a validator: the SDK checks no more than this either.)
 */
export function toolCallOf(part: Extract<LanguageModelV4StreamPart, { type: 'tool-call' }>, tools: ModelRequest['tools']): ModelPart {
  const known = Object.hasOwn(tools, part.toolName);
  const input = known && part.input.trim() === '' ? {} : parsedOr(part.input);
  return { type: 'tool-call', toolCallId: part.toolCallId, toolName: part.toolName, input };
}

/** A finish's usage in runestream's shape: the counts the provider gave, flat; total = input + output. */
export function usageOf(usage: LanguageModelV4Usage): Record<string, number> {
  const { total: inputTokens, cacheRead: cacheReadTokens } = usage.inputTokens;
  const { total: outputTokens, reasoning: reasoningTokens } = usage.outputTokens;
  const totalTokens = inputTokens === undefined && outputTokens === undefined ? undefined : (inputTokens ?? 0) + (outputTokens ?? 0);
  const all: Record<string, number | undefined> = { inputTokens, outputTokens, totalTokens, cacheReadTokens, reasoningTokens };
  return Object.fromEntries(Object.entries(all).filter((entry): entry is [string, number] => entry[1] !== undefined));
}

const PROVIDER_STREAM_ERROR = Symbol.for('vercel.ai.providerStreamError');

type Fields = Record<PropertyKey, unknown>;
const fieldsOf = (value: unknown): Fields | undefined => (typeof value === 'object' && value !== null ? (value as Fields) : undefined);
const stringOf = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
const codeOf = (value: unknown): string | number | undefined => (typeof value === 'string' || typeof value === 'number' ? value : undefined);
const statusOf = (value: unknown): number | undefined => {
  const status = typeof value === 'string' && /^\d{3}$/.test(value) ? Number(value) : value;
  return typeof status === 'number' && Number.isInteger(status) && status >= 400 && status <= 599 ? status : undefined;
};
/** What some providers send as their whole error message, and the HTTP status it means. */
const STATUS_OF_MESSAGE: ReadonlyMap<string, number> = new Map([
  ['overloaded', 503],
  ['overloaded error', 503],
  ['model overloaded', 503],
  ['internal server error', 500],
  ['service unavailable', 503],
]);

/**
 * The error of a provider's `error` part, as `streamText` reports it: an `Error` as it is; an
 * error payload (`{ message, type, code }`, or one under `error` or `response.error`: what an
 * OpenAI-style server sends mid-stream) as the SDK's `StreamProviderError`; anything else as it is.
 */
export function streamErrorOf(error: unknown): unknown {
  if (error instanceof Error || Object.prototype.toString.call(error) === '[object Error]' || AISDKError.isInstance(error)) return error;
  const outer = fieldsOf(error);
  if (outer === undefined) return error;
  const marked = outer[PROVIDER_STREAM_ERROR] === true;
  const details = marked ? outer : (fieldsOf(fieldsOf(outer.response)?.error) ?? fieldsOf(outer.error) ?? outer);
  const message = stringOf(details.message);
  if (message === undefined) return error;
  const statusCode =
    [details.statusCode, outer.statusCode, details.status_code, outer.status_code, details.status, outer.status, details.code, outer.code]
      .map(statusOf)
      .find((s) => s !== undefined) ?? STATUS_OF_MESSAGE.get(message.trim().toLowerCase());
  const isRetryable = [details.isRetryable, outer.isRetryable, details.is_retryable, outer.is_retryable].find((r) => typeof r === 'boolean') as boolean | undefined;
  return new StreamProviderError({
    message,
    type: stringOf(details.type) ?? stringOf(outer.type),
    code: codeOf(details.code) ?? codeOf(outer.code),
    statusCode,
    isRetryable: isRetryable ?? (statusCode !== undefined && (statusCode === 408 || statusCode === 409 || statusCode === 429 || statusCode >= 500)),
    data: marked ? outer.data : error,
  });
}
