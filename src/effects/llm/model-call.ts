import { dynamicTool, jsonSchema, streamText, type LanguageModel, type LanguageModelUsage, type TextStreamPart, type ToolSet } from 'ai';
import { Observable, asyncScheduler, type SchedulerLike } from 'rxjs';
import { idleTimeout } from './idle-timeout.js';
import type { ModelPart, ModelRequest, ToolSpec } from './model-types.js';

/** Options of {@link modelCall$}, with their defaults. */
export interface ModelCallOptions {
  /**
   * A call that produces nothing (no part at all, not even a tool input delta) for this long fails
   * with a {@link ModelCallTimeoutError}: before its first part, or between two. `Infinity` turns
   * it off. Default 120,000 ms.
   */
  readonly timeoutMs?: number;
  /** The clock of the timeout. Default: rxjs `asyncScheduler`; tests pass a virtual one. */
  readonly scheduler?: SchedulerLike;
}

/** A model call that produced nothing for its `timeoutMs`: the provider hangs or is unreachable. */
export class ModelCallTimeoutError extends Error {
  override readonly name = 'ModelCallTimeoutError';
  constructor(
    /** `provider/modelId`, or the model's id string. */
    readonly model: string,
    readonly timeoutMs: number,
  ) {
    super(`model call to "${model}" produced nothing for ${timeoutMs} ms (its timeoutMs): the provider hangs or is unreachable`);
  }
}

/** How a model is named in errors: `provider/modelId`, or the id a string model is. */
export const modelName = (model: LanguageModel): string => (typeof model === 'string' ? model : `${model.provider}/${model.modelId}`);

/** A model's id (`modelId`, or the string a string model is): the key of a price table. */
export const modelIdOf = (model: LanguageModel): string => (typeof model === 'string' ? model : model.modelId);

/**
 * Who serves a model: the AI SDK provider's id (`openai.chat`, `anthropic.messages`), or for a
 * string model (`openai/gpt-4o`, the gateway's form) what comes before its `/`; `undefined` when
 * a string model names none.
 */
export const providerOf = (model: LanguageModel): string | undefined => {
  if (typeof model !== 'string') return model.provider;
  const slash = model.indexOf('/');
  return slash > 0 ? model.slice(0, slash) : undefined;
};

/**
 * The request's tools as AI SDK tools: JSON Schema input, and no `execute`, so the SDK stops at
 * the tool calls (finish reason `tool-calls`) and runestream's tool machine runs them.
 */
export const sdkToolsOf = (tools: ModelRequest['tools']): ToolSet =>
  Object.fromEntries(
    Object.entries(tools).map(([name, spec]: [string, ToolSpec]) => [name, dynamicTool({ description: spec.description, inputSchema: jsonSchema(spec.inputSchema) })]),
  );

const usageOf = (usage: LanguageModelUsage): Record<string, number> => {
  const all: Record<string, number | undefined> = {
    inputTokens: usage.inputTokens,
    outputTokens: usage.outputTokens,
    totalTokens: usage.totalTokens,
    cacheReadTokens: usage.inputTokenDetails?.cacheReadTokens,
    reasoningTokens: usage.outputTokenDetails?.reasoningTokens,
  };
  return Object.fromEntries(Object.entries(all).filter((entry): entry is [string, number] => entry[1] !== undefined));
};

/**
 * The part a turn needs from one of the SDK's `fullStream` parts, or `undefined` for the rest
 * (`start`, `text-start`, tool input deltas, `finish-step`, ...). A tool call the SDK found
 * invalid (an unknown tool, unparsable input) is passed on as it came: the tool machine answers
 * it with an error result the model can read; the SDK's `tool-error` part after it is dropped.
 */
export const modelPartOf = (part: TextStreamPart<ToolSet>): ModelPart | undefined => {
  switch (part.type) {
    case 'text-delta':
      return { type: 'text-delta', text: part.text };
    case 'tool-call':
      return { type: 'tool-call', toolCallId: part.toolCallId, toolName: part.toolName, input: part.input };
    case 'finish':
      return { type: 'finish', finishReason: part.finishReason, usage: usageOf(part.totalUsage) };
    default:
      return undefined;
  }
};

/**
 * One model call as an Observable of {@link ModelPart}s, over the AI SDK's `streamText`.
 *
 * 1. Subscribing starts the call: `streamText` with the request's system prompt, messages and
 *    tools (JSON Schema, no `execute`: the stream stops at tool calls), `maxRetries: 0` (fallback
 *    is the provider chain's job) and its own `AbortController`.
 * 2. It emits `text-delta`, `tool-call` and `finish` parts as they stream, then completes. The
 *    `finish` part names the model that answered (its id) beside its usage.
 * 3. A provider error (a rejected request such as an HTTP 500, an `error` part, a stream that
 *    breaks) errors the Observable with the provider's own error, nothing after it.
 * 4. A call that produces nothing for `timeoutMs` errors with a {@link ModelCallTimeoutError}.
 * 5. Unsubscribing aborts the call: its HTTP request is closed.
 *
 * ## Example
 * ```ts
 * import { modelCall$, scriptedModel } from 'runestream/agents';
 * const model = scriptedModel([{ text: 'Hello there' }]);
 * modelCall$(model, { messages: [{ role: 'user', content: 'Hi' }], tools: {} }).subscribe((part) => console.log(part));
 * // Logs:
 * // { type: 'text-delta', text: 'Hello' }
 * // { type: 'text-delta', text: ' there' }
 * // { type: 'finish', finishReason: 'stop', usage: { outputTokens: 2, totalTokens: 2 }, model: 'scripted-model', provider: 'scripted' }
 * ```
 *
 * @see chainCall$ for a call through a chain of providers with circuit breakers.
 */
export function modelCall$(model: LanguageModel, request: ModelRequest, options: ModelCallOptions = {}): Observable<ModelPart> {
  const { timeoutMs = 120_000, scheduler = asyncScheduler } = options;
  if (!(timeoutMs > 0)) throw new TypeError(`modelCall$: "timeoutMs" must be positive (or Infinity: no timeout), got ${String(timeoutMs)}`);
  const name = modelName(model);
  const modelId = modelIdOf(model);
  const provider = providerOf(model);
  const answered = provider === undefined ? { model: modelId } : { model: modelId, provider };

  const sdkParts$ = new Observable<TextStreamPart<ToolSet>>((subscriber) => {
    const controller = new AbortController();
    let done = false;
    const result = streamText({
      model,
      ...(request.system === undefined ? {} : { system: request.system }),
      messages: [...request.messages],
      tools: sdkToolsOf(request.tools),
      maxRetries: 0,
      abortSignal: controller.signal,
      onError: () => {}, // the error reaches the subscriber; the default would also log it
    });
    (async () => {
      for await (const part of result.fullStream) {
        if (subscriber.closed) return;
        if (part.type === 'error') throw part.error;
        subscriber.next(part);
      }
      subscriber.complete();
    })()
      .catch((error: unknown) => {
        if (!controller.signal.aborted) subscriber.error(error);
      })
      .finally(() => (done = true));
    return () => {
      if (!done) controller.abort();
    };
  });

  const timed$ = timeoutMs === Infinity ? sdkParts$ : sdkParts$.pipe(idleTimeout(timeoutMs, scheduler, () => new ModelCallTimeoutError(name, timeoutMs)));

  return new Observable<ModelPart>((subscriber) =>
    timed$.subscribe({
      next: (part) => {
        const modelPart = modelPartOf(part);
        if (modelPart !== undefined) subscriber.next(modelPart.type === 'finish' ? { ...modelPart, ...answered } : modelPart);
      },
      error: (error: unknown) => subscriber.error(error),
      complete: () => subscriber.complete(),
    }),
  );
}
