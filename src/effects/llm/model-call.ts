import { NoOutputGeneratedError, type LanguageModel } from 'ai';
import { logWarnings, resolveLanguageModel } from 'ai/internal';
import type { LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { Observable, asyncScheduler, type SchedulerLike } from 'rxjs';
import { idleTimeout } from './idle-timeout.js';
import type { ModelPart, ModelRequest } from './model-types.js';
import { callOptionsOf, streamErrorOf, toolCallOf, usageOf } from './provider-stream.js';

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
 * One model call as an Observable of {@link ModelPart}s, read from the provider's own stream
 * (`doStream` of the AI SDK's `LanguageModelV4`): what `streamText` would stream, without its
 * per-part pipeline.
 *
 * 1. Subscribing starts the call. A model id string is resolved as the AI SDK does (its global
 *    provider, by default the gateway); a V2 or V3 model is adapted. The model gets the request's
 *    system prompt and messages (the SDK's conversion), its tools as JSON Schema function tools
 *    (tool choice `auto`; no `execute`: the call stops at tool calls), the call's own
 *    `AbortController`, and one attempt (fallback is the provider chain's job).
 * 2. It emits `text-delta`, `tool-call` and `finish` parts as they stream, then completes. A tool
 *    call's input is its JSON parsed; a call the SDK would find invalid (an unknown tool,
 *    unparsable input) is passed on as it came, with what parses of its input: the tool machine
 *    answers it with an error result the model can read. The `finish` part has the finish reason,
 *    the usage (`inputTokens`, `outputTokens`, `totalTokens`, `cacheReadTokens`,
 *    `reasoningTokens`, those the provider counted) and names the model that answered (its id)
 *    and its provider. A stream that ends without a finish finishes `other`; one that ends
 *    with no part at all errors with the SDK's `NoOutputGeneratedError`.
 * 3. A provider error (a rejected request such as an HTTP 500, an `error` part, a stream that
 *    breaks) errors the Observable with the provider's own error, nothing after it. (An `error`
 *    part's payload that is not an `Error` becomes the SDK's `StreamProviderError`, as in
 *    `streamText`.)
 * 4. A call that produces nothing for `timeoutMs` errors with a {@link ModelCallTimeoutError}.
 *    Any part of the provider's counts, a tool input delta too.
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

  // Every provider part, as the ModelPart it makes or `undefined` (a part that only shows the call is alive).
  const providerParts$ = new Observable<ModelPart | undefined>((subscriber) => {
    const controller = new AbortController();
    let reader: ReadableStreamDefaultReader<LanguageModelV4StreamPart> | undefined;
    let done = false;
    (async () => {
      const languageModel = resolveLanguageModel(model);
      const { stream } = await languageModel.doStream(await callOptionsOf(languageModel, request, controller.signal));
      reader = stream.getReader();
      let parts = 0;
      let finished = false;
      for (;;) {
        const read = await reader.read();
        if (read.done || subscriber.closed) break;
        const part = read.value;
        parts++;
        switch (part.type) {
          case 'text-delta':
            subscriber.next({ type: 'text-delta', text: part.delta });
            break;
          case 'tool-call':
            subscriber.next(toolCallOf(part, request.tools));
            break;
          case 'finish':
            finished = true;
            subscriber.next({ type: 'finish', finishReason: part.finishReason.unified, usage: usageOf(part.usage), ...answered });
            break;
          case 'error':
            throw streamErrorOf(part.error);
          case 'stream-start':
            if (part.warnings.length > 0) logWarnings({ warnings: part.warnings, provider: languageModel.provider, model: languageModel.modelId });
            subscriber.next(undefined);
            break;
          default:
            subscriber.next(undefined);
        }
      }
      if (subscriber.closed) return;
      if (parts === 0) throw new NoOutputGeneratedError({ message: 'No output generated. Check the stream for errors.' });
      if (!finished) subscriber.next({ type: 'finish', finishReason: 'other', usage: {}, ...answered });
      // Read to its end: nothing to abort (an abort makes a DOMException, its stack captured, per call).
      done = true;
      subscriber.complete();
    })()
      .catch((error: unknown) => {
        if (!controller.signal.aborted) subscriber.error(error);
      })
      .finally(() => (done = true));
    // A call given up (unsubscribed, or failed mid-stream) is aborted, its response body released.
    return () => {
      if (done) return;
      controller.abort();
      // Also for a provider whose stream does not watch the signal: the response body is released.
      reader?.cancel().catch(() => {});
    };
  });

  const timed$ = timeoutMs === Infinity ? providerParts$ : providerParts$.pipe(idleTimeout(timeoutMs, scheduler, () => new ModelCallTimeoutError(name, timeoutMs)));

  return new Observable<ModelPart>((subscriber) =>
    timed$.subscribe({
      next: (part) => {
        if (part !== undefined) subscriber.next(part);
      },
      error: (error: unknown) => subscriber.error(error),
      complete: () => subscriber.complete(),
    }),
  );
}
