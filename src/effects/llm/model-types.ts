import type { JSONSchema7, LanguageModel, ModelMessage } from 'ai';
import type { CircuitBreakerInput } from '../../reducers/circuit-breaker/schema.js';
import type { EpicCommand } from '../../streams/epic.js';

/** What a tool looks like to a model: no `execute`, so the model's stream stops at the tool call. */
export interface ToolSpec {
  readonly description: string;
  /** JSON Schema of the tool's input (from its zod schema, by zod's own converter). */
  readonly inputSchema: JSONSchema7;
}

/** One model call: the conversation so far and the tools the model may call. */
export interface ModelRequest {
  readonly system?: string;
  readonly messages: readonly ModelMessage[];
  readonly tools: Readonly<Record<string, ToolSpec>>;
}

/** What a model call streams, reduced to what a turn needs. */
export type ModelPart =
  | { readonly type: 'text-delta'; readonly text: string }
  | { readonly type: 'tool-call'; readonly toolCallId: string; readonly toolName: string; readonly input: unknown }
  | {
      readonly type: 'finish';
      readonly finishReason: string;
      readonly usage?: Readonly<Record<string, number | undefined>>;
      /** The id of the model that answered (`modelId`, or the string a string model is): what prices are keyed by. */
      readonly model?: string;
      /** Who served it: the AI SDK provider's id (`openai.chat`), see `providerOf`. */
      readonly provider?: string;
    };

/** A model behind a name: one link of a fallback chain, with its own circuit breaker. */
export interface Provider {
  /** Names its breaker stream, `provider/<name>`: one breaker per name, whichever chains use it. */
  readonly name: string;
  readonly model: LanguageModel;
  /**
   * Its breaker's settings, each defaulted: `failureThreshold` 3, `successThreshold` 1,
   * `openTimeoutMs` 30,000, `halfOpenMaxCalls` 1 (HALF_OPEN trial calls at once, counted over
   * every chain using this provider). A stored breaker with other settings takes these (a
   * `settings_changed` rune) before its next outcome.
   */
  readonly breaker?: Partial<CircuitBreakerInput>;
}

/**
 * A model call answered with nothing (no text, no tool call) that a provider chain fell over
 * from: the provider answered it, and billed it, so it counts as a model call with its tokens.
 */
export interface SpentCall {
  readonly type: 'spent';
  /** The empty answer's usage record (its `finish` part's), numbers only. */
  readonly usage: Readonly<Record<string, number>>;
  /** The id of the model that answered it, when the provider said. */
  readonly model?: string;
}

/**
 * What a call through a provider chain emits: the model's parts, commands for its breakers, and
 * each empty answer it fell over from, as it falls over (a {@link SpentCall}).
 */
export type ChainOutput = { readonly type: 'part'; readonly part: ModelPart } | { readonly type: 'command'; readonly command: EpicCommand } | SpentCall;
