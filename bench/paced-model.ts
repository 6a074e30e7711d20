import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import type { LanguageModelV4, LanguageModelV4CallOptions, LanguageModelV4StreamPart } from '@ai-sdk/provider';

/** A model whose answers take real time, with what that time was, call by call. */
export interface PacedModel extends LanguageModelV4 {
  /** Every finished call: its key (`keyOf` its options) and its time in ms, from `doStream` to its last part. */
  readonly calls: { readonly key: string; readonly ms: number }[];
}

/**
 * `model` with each text delta held back `deltaMs` (a provider streaming at a fixed pace), so
 * a call answering `n` deltas takes at least `n * deltaMs` of real time. What else a turn takes
 * is not the model's.
 */
export function pacedModel(model: LanguageModelV4, deltaMs: number, keyOf: (call: LanguageModelV4CallOptions) => string = () => ''): PacedModel {
  const calls: { key: string; ms: number }[] = [];
  return {
    ...model,
    calls,
    doStream: async (options) => {
      const started = performance.now();
      const key = keyOf(options);
      const result = await model.doStream(options);
      const paced = result.stream.pipeThrough(
        new TransformStream<LanguageModelV4StreamPart, LanguageModelV4StreamPart>({
          async transform(part, controller) {
            if (part.type === 'text-delta') await sleep(deltaMs);
            controller.enqueue(part);
          },
          flush() {
            calls.push({ key, ms: performance.now() - started });
          },
        }),
      );
      return { ...result, stream: paced };
    },
  };
}
