import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4Content,
  LanguageModelV4FinishReason,
  LanguageModelV4GenerateResult,
  LanguageModelV4StreamPart,
  LanguageModelV4StreamResult,
  LanguageModelV4Usage,
} from '@ai-sdk/provider';

/** One tool call a scripted step makes. */
export interface ScriptedToolCall {
  readonly toolName: string;
  /** The tool's input; sent to the SDK JSON-encoded, as a provider does. */
  readonly input: unknown;
  /** Default: `call_<call number>_<index in the step>`, e.g. `call_1_0`: deterministic. */
  readonly toolCallId?: string;
}

/**
 * What one model call answers. A step streams its text first, then its tool calls, then finishes;
 * or it fails (`error`) or hangs (`hang`), after `afterDeltas` text deltas.
 */
export interface ScriptStep {
  /**
   * Text to stream: a string is split into word deltas (`'Hello big world'` streams `'Hello'`,
   * `' big'`, `' world'`); an array is streamed as the deltas it holds. Default: no text.
   */
  readonly text?: string | readonly string[];
  /** Tool calls, streamed after the text. Default: none. */
  readonly toolCalls?: readonly ScriptedToolCall[];
  /** Default: `'tool-calls'` if the step calls tools, else `'stop'`. */
  readonly finishReason?: LanguageModelV4FinishReason['unified'];
  /** Default: input tokens unknown; output tokens = text deltas + tool calls. */
  readonly usage?: { readonly inputTokens?: number; readonly outputTokens?: number };
  /**
   * Fail the call with this error (a string becomes an `Error` with that message). Without
   * `afterDeltas` the call is refused before any output (`doStream` rejects, as an HTTP error
   * does); with it, that many text deltas stream first, then an `error` part.
   */
  readonly error?: unknown;
  /** Produce nothing more, never finishing, until the call is aborted: a provider that hangs. */
  readonly hang?: boolean;
  /** With `error` or `hang`: how many of the text's deltas stream first. Default 0. */
  readonly afterDeltas?: number;
}

/** A step, or a function that makes one from the call (its prompt, tools, ...) and its number, from 1. */
export type ScriptEntry = ScriptStep | ((call: LanguageModelV4CallOptions, callNumber: number) => ScriptStep);

/** Options of {@link scriptedModel}, with their defaults. */
export interface ScriptedModelOptions {
  /** Default `'scripted'`. */
  readonly provider?: string;
  /** Default `'scripted-model'`. */
  readonly modelId?: string;
  /**
   * What a call past the end of the script gets: `'error'` (default) refuses it with a
   * {@link ScriptExhaustedError}, so a test that calls the model once too often fails loudly;
   * `'cycle'` starts the script over (a demo that chats forever).
   */
  readonly whenExhausted?: 'error' | 'cycle';
  /**
   * How many of the latest calls `doStreamCalls` and `doGenerateCalls` keep, the oldest dropped
   * first: a model that answers for long (a served demo, a benchmark) sets a bound, since every
   * call's options hold its whole prompt. A non-negative integer; default: every call (a test
   * asserts them).
   */
  readonly keepCalls?: number;
}

/** An offline, deterministic `LanguageModelV4` that also records the calls it received. */
export interface ScriptedModel extends LanguageModelV4 {
  /** Every `doStream` call's options, in order (its `prompt`, `tools`, `abortSignal`, ...); the latest `keepCalls`. */
  readonly doStreamCalls: LanguageModelV4CallOptions[];
  /** Every `doGenerate` call's options, in order; the latest `keepCalls`. */
  readonly doGenerateCalls: LanguageModelV4CallOptions[];
}

/** A call past the end of a script whose `whenExhausted` is `'error'`. */
export class ScriptExhaustedError extends Error {
  override readonly name = 'ScriptExhaustedError';
  constructor(
    readonly modelId: string,
    readonly callNumber: number,
    readonly steps: number,
  ) {
    super(`scriptedModel "${modelId}": call ${callNumber} has no step, the script has ${steps}; ` + `add steps, or pass { whenExhausted: 'cycle' } to start it over`);
  }
}

/** Splits text into word deltas that concatenate back to it: each word with the whitespace before it. */
export const wordDeltas = (text: string): string[] => text.split(/(?<=\S)(?=\s)/).filter((delta) => delta.length > 0);

/** How many parts the stream queues ahead of its reader: enough to stream 100,000 deltas in few pulls. */
const HIGH_WATER_MARK = 512;

const abortErrorOf = (signal: AbortSignal): unknown =>
  signal.reason instanceof Error || (typeof DOMException === 'function' && signal.reason instanceof DOMException)
    ? signal.reason
    : new DOMException('The model call was aborted', 'AbortError');

const errorOf = (error: unknown): unknown => (typeof error === 'string' ? new Error(error) : error);

const usageOf = (step: ScriptStep, deltas: number): LanguageModelV4Usage => ({
  inputTokens: { total: step.usage?.inputTokens, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: step.usage?.outputTokens ?? deltas + (step.toolCalls?.length ?? 0), text: undefined, reasoning: undefined },
});

const finishReasonOf = (step: ScriptStep): LanguageModelV4FinishReason => {
  const unified = step.finishReason ?? ((step.toolCalls?.length ?? 0) > 0 ? 'tool-calls' : 'stop');
  return { unified, raw: unified };
};

/**
 * The parts of a step, produced lazily: a hundred thousand deltas are never held as part objects.
 * Ends with `finish`, an `error` part, or nothing at all (`hang`).
 */
function* partsOf(step: ScriptStep, callNumber: number): Generator<LanguageModelV4StreamPart> {
  const deltas = typeof step.text === 'string' ? wordDeltas(step.text) : (step.text ?? []);
  const failing = step.error !== undefined || step.hang === true;
  const streamed = failing ? Math.min(deltas.length, step.afterDeltas ?? 0) : deltas.length;
  yield { type: 'stream-start', warnings: [] };
  const textId = `text_${callNumber}`;
  if (streamed > 0) {
    yield { type: 'text-start', id: textId };
    for (let i = 0; i < streamed; i++) yield { type: 'text-delta', id: textId, delta: deltas[i]! };
  }
  if (step.error !== undefined) {
    yield { type: 'error', error: errorOf(step.error) };
    return;
  }
  if (step.hang === true) return;
  if (streamed > 0) yield { type: 'text-end', id: textId };
  for (const [index, call] of (step.toolCalls ?? []).entries()) {
    const id = call.toolCallId ?? `call_${callNumber}_${index}`;
    const input = JSON.stringify(call.input ?? {});
    yield { type: 'tool-input-start', id, toolName: call.toolName };
    yield { type: 'tool-input-delta', id, delta: input };
    yield { type: 'tool-input-end', id };
    yield { type: 'tool-call', toolCallId: id, toolName: call.toolName, input };
  }
  yield { type: 'finish', usage: usageOf(step, deltas.length), finishReason: finishReasonOf(step) };
}

/**
 * An offline, deterministic AI SDK model (`LanguageModelV4`) that answers from a script: for tests
 * and demos. No network, no timers.
 *
 * 1. Each call (`doStream` or `doGenerate`) takes the next step of the script; past the end it is
 *    refused with a {@link ScriptExhaustedError}, or, with `whenExhausted: 'cycle'`, the script
 *    starts over.
 * 2. A step streams its text as deltas, then its tool calls (ids `call_<call>_<index>` unless
 *    given), then `finish`. Or it fails: before any output (`doStream` rejects) or after
 *    `afterDeltas` deltas (an `error` part). Or it hangs until aborted.
 * 3. The call's `abortSignal` is honoured: once it aborts, nothing more is emitted and the call
 *    (or its stream) fails with the signal's `AbortError`.
 * 4. Every call's options are recorded in `doStreamCalls` / `doGenerateCalls`, so a test can
 *    assert the prompt and the tools the model was given (the latest `keepCalls` of them).
 *
 * Parts are produced on demand as the SDK reads them, in batches, so 100,000 deltas stream quickly.
 *
 * ## Example
 * ```ts
 * import { streamText } from 'ai';
 * import { scriptedModel } from 'runestream/agents';
 * const model = scriptedModel([{ text: 'Hello there' }, { toolCalls: [{ toolName: 'weather', input: { city: 'Oslo' } }] }]);
 * const result = streamText({ model, prompt: 'Hi' });
 * console.log(await result.text);
 * console.log(model.doStreamCalls[0]?.prompt.at(-1)?.content);
 * // Logs:
 * // Hello there
 * // [ { type: 'text', text: 'Hi' } ]
 * ```
 *
 * @see modelCall$ for one call as an Observable of parts.
 */
export function scriptedModel(script: readonly ScriptEntry[], options: ScriptedModelOptions = {}): ScriptedModel {
  const { provider = 'scripted', modelId = 'scripted-model', whenExhausted = 'error' } = options;
  if (!Array.isArray(script)) throw new TypeError(`scriptedModel: "script" must be an array of steps, got ${typeof script}`);
  if (whenExhausted !== 'error' && whenExhausted !== 'cycle') {
    throw new TypeError(`scriptedModel: "whenExhausted" must be 'error' or 'cycle', got ${String(whenExhausted)}`);
  }
  if (whenExhausted === 'cycle' && script.length === 0) throw new TypeError(`scriptedModel: a cycling script needs at least one step`);
  const { keepCalls = Number.POSITIVE_INFINITY } = options;
  if (keepCalls !== Number.POSITIVE_INFINITY && !(Number.isInteger(keepCalls) && keepCalls >= 0)) {
    throw new TypeError(`scriptedModel: "keepCalls" must be a non-negative integer, got ${String(keepCalls)}`);
  }
  let calls = 0;
  const doStreamCalls: LanguageModelV4CallOptions[] = [];
  const doGenerateCalls: LanguageModelV4CallOptions[] = [];
  /** Records `call` in `kept`, dropping the oldest past `keepCalls`. */
  const record = (kept: LanguageModelV4CallOptions[], call: LanguageModelV4CallOptions): void => {
    kept.push(call);
    if (kept.length > keepCalls) kept.splice(0, kept.length - keepCalls);
  };

  /** The step of the next call, and its number. Throws for an aborted call or an exhausted script. */
  const nextStep = (call: LanguageModelV4CallOptions): { step: ScriptStep; callNumber: number } => {
    const callNumber = ++calls;
    if (call.abortSignal?.aborted === true) throw abortErrorOf(call.abortSignal);
    if (callNumber > script.length && whenExhausted === 'error') throw new ScriptExhaustedError(modelId, callNumber, script.length);
    const entry = script[(callNumber - 1) % script.length]!;
    return { step: typeof entry === 'function' ? entry(call, callNumber) : entry, callNumber };
  };

  const doStream = async (call: LanguageModelV4CallOptions): Promise<LanguageModelV4StreamResult> => {
    record(doStreamCalls, call);
    const { step, callNumber } = nextStep(call);
    if (step.error !== undefined && step.afterDeltas === undefined) throw errorOf(step.error);
    const parts = partsOf(step, callNumber);
    const signal = call.abortSignal;
    let onAbort: (() => void) | undefined;
    const stream = new ReadableStream<LanguageModelV4StreamPart>(
      {
        start(controller) {
          if (signal === undefined) return;
          // Also wakes a hanging step: nothing is pulled from it, but the abort still ends it.
          onAbort = () => controller.error(abortErrorOf(signal));
          signal.addEventListener('abort', onAbort, { once: true });
        },
        // Once aborted the stream is errored, and never pulled again.
        pull(controller) {
          while ((controller.desiredSize ?? 0) > 0) {
            const next = parts.next();
            if (next.done) {
              // A hanging step stays open; any other ends here.
              // (The abort listener stays: an abort still drops what is queued and unread.)
              if (step.hang !== true || step.error !== undefined) controller.close();
              return;
            }
            controller.enqueue(next.value);
          }
        },
        cancel() {
          if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort);
        },
      },
      { highWaterMark: HIGH_WATER_MARK },
    );
    return { stream };
  };

  const doGenerate = async (call: LanguageModelV4CallOptions): Promise<LanguageModelV4GenerateResult> => {
    record(doGenerateCalls, call);
    const { step, callNumber } = nextStep(call);
    if (step.error !== undefined) throw errorOf(step.error);
    if (step.hang === true) {
      const signal = call.abortSignal;
      return new Promise((_, reject) => signal?.addEventListener('abort', () => reject(abortErrorOf(signal)), { once: true }));
    }
    const content: LanguageModelV4Content[] = [];
    let usage: LanguageModelV4Usage | undefined;
    let finishReason: LanguageModelV4FinishReason = finishReasonOf(step);
    let text = '';
    for (const part of partsOf(step, callNumber)) {
      if (part.type === 'text-delta') text += part.delta;
      else if (part.type === 'tool-call') content.push(part);
      else if (part.type === 'finish') ({ usage, finishReason } = part);
    }
    if (text.length > 0) content.unshift({ type: 'text', text });
    return { content, finishReason, usage: usage ?? usageOf(step, 0), warnings: [] };
  };

  return { specificationVersion: 'v4', provider, modelId, supportedUrls: {}, doStream, doGenerate, doStreamCalls, doGenerateCalls };
}
