import { z } from 'zod';
import { Usage as BudgetUsage } from '../budget.js';
import { ToolCallInput, ToolCallStatus } from '../tool-call/schema.js';

/** Seed 003 "TurnEngine State Machine"; no state is terminal (`turn_finalized` returns to `idle`). */
export const TurnEngineStateName = z.enum(['idle', 'streaming', 'tool_executing', 'completed', 'interrupted', 'error']);
export type TurnEngineStateName = z.infer<typeof TurnEngineStateName>;

/** Token usage as the provider reports it: counts, possibly nested (e.g. cached-token details). */
const Usage = z.record(z.string(), z.json());

/** The spawn input: the agent whose turns these are, for the `turn.started` rune's `agentId`. */
export const TurnEngineInput = z.object({ agentId: z.string().min(1).optional() });
export type TurnEngineInput = z.infer<typeof TurnEngineInput>;

/** How one call of a tool round ended, for the `turn.tools_finished` rune's summaries. */
export const ToolResultSummary = z.object({ callId: z.string().min(1), status: ToolCallStatus });
export type ToolResultSummary = z.infer<typeof ToolResultSummary>;

/**
 * One input of a model call as the log records it: the SHA-256 of its canonical JSON (`digest`),
 * with the value itself only the first time its turn stream records that digest.
 */
export const RecordedInput = z.object({ digest: z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 digest in hex'), value: z.json().optional() });
export type RecordedInput = z.infer<typeof RecordedInput>;

/**
 * What a model call was sent, recorded by the rune that ends it, so its request is recoverable
 * from the log (`modelRequestOf`) while the log grows with each distinct prompt once: the turn
 * stream's seq its messages were built from (the transcript of its runes up to `upTo`, with its
 * tool calls' outcomes), its system prompt and its tool definitions.
 */
export const ModelCallRequest = z.object({
  upTo: z.number().int().nonnegative(),
  system: RecordedInput.optional(),
  tools: RecordedInput,
});
export type ModelCallRequest = z.infer<typeof ModelCallRequest>;

/** What a model response carries besides its content: the provider's usage, the model's name, and its cost. */
const ResponseUsage = {
  /** What the call was sent (absent in runes written before calls were recorded). */
  request: ModelCallRequest.optional(),
  usage: Usage.optional(),
  /** The name of the model that answered (its id), the key of the price table. */
  model: z.string().optional(),
  /** Who served it: the AI SDK provider's id (`openai.chat`), for traces. */
  provider: z.string().optional(),
  /** What the response cost, from the price table (`agentEpics({ prices })`), when the model is in it. */
  cost: z.number().nonnegative().optional(),
  /**
   * The turn's wall clock when the response ended, from its `turn.started` rune, on the engine's
   * scheduler (`agentModel` measures it): `turnUsage.wallClockMs`, and `turn.completed`'s.
   */
  wallClockMs: z.number().int().nonnegative().optional(),
};

/** The engine's state: the turn in progress (or the last one) and what it has produced so far. */
export const TurnEngineState = z.object({
  value: TurnEngineStateName,
  /** The agent whose turns these are (the spawn input's). */
  agentId: z.string().optional(),
  /** Turns started so far; the current turn's number, counting from 1. */
  turn: z.number().int().nonnegative(),
  /** The input the current turn started with. */
  input: z.string(),
  /** The assistant's deltas of the current turn, concatenated: the partial output if it is interrupted. */
  output: z.string(),
  /**
   * The same text, one entry per model call of the current turn, in order (`output` is their
   * concatenation): a call that asked for tools with only a preamble ("Let me look at the clock.")
   * is its own message, apart from the answer after the tools; a call with no text is `''`.
   * Absent before the first turn, and in a snapshot saved before messages were kept.
   */
  messages: z.array(z.string()).optional(),
  /** The tool calls of the current turn's latest tool round. */
  callIds: z.array(z.string()),
  /** Why the turn was interrupted (`"steered"` by a steer). */
  reason: z.string().optional(),
  /** Why the turn failed (a stream error or an unrecoverable tool crash). */
  error: z.string().optional(),
  /** The input a `steer` injected, for the next turn to start with. */
  steerInput: z.string().optional(),
  /** The provider's usage record of the turn's last response. */
  usage: Usage.optional(),
  /**
   * The current turn's usage so far, summed over its responses: tokens, model calls (responses),
   * tool calls asked for, cost; `wallClockMs` is the turn's time up to its latest response, as the
   * response's event says it (the machine sees no clock; 0 for a response that does not say).
   */
  turnUsage: BudgetUsage,
});
export type TurnEngineState = z.infer<typeof TurnEngineState>;

/** The events of the seed's diagram; `tools_finished.more` is its `continue` / `no_more_calls`. */
export const TurnEngineEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('start_turn'), input: z.string() }),
  z.object({ type: z.literal('assistant_delta'), content: z.string() }),
  z.object({
    type: z.literal('tool_calls_received'),
    callIds: z.array(z.string().min(1)).min(1),
    /** What the model asked for, call by call: kept in the log so the calls can be created (again, after a crash) from it. */
    calls: z.array(ToolCallInput).optional(),
    ...ResponseUsage,
  }),
  z.object({ type: z.literal('response_done'), ...ResponseUsage }),
  z.object({
    type: z.literal('model_call_spent'),
    /** The usage of a call answered with nothing, that a provider chain fell over from: counted in `turnUsage` at once, as a response. */
    usage: Usage,
    model: z.string().optional(),
    cost: z.number().nonnegative().optional(),
    request: ModelCallRequest.optional(),
  }),
  z.object({
    type: z.literal('interrupt'),
    reason: z.string().optional(),
    /** What the call it cuts short may have used (a call that died with its process may have been answered): counted in `turnUsage`. */
    usage: Usage.optional(),
  }),
  z.object({ type: z.literal('steer'), input: z.string() }),
  z.object({
    type: z.literal('stream_error'),
    error: z.string(),
    /**
     * What calls answered before the failure used, counted in `turnUsage`: what runes stored before
     * `model_call_spent` carry (empty answers a provider chain fell over from). Not set now.
     */
    usage: Usage.optional(),
    /** What the failed call was sent. */
    request: ModelCallRequest.optional(),
  }),
  z.object({
    type: z.literal('tools_finished'),
    more: z.boolean(),
    /** How each call of the round ended, when the dispatcher knows: carried by the `turn.tools_finished` rune. */
    resultSummaries: z.array(ToolResultSummary).optional(),
  }),
  z.object({ type: z.literal('tool_crash'), error: z.string() }),
  z.object({ type: z.literal('turn_finalized') }),
]);
export type TurnEngineEvent = z.infer<typeof TurnEngineEvent>;

/**
 * The payload of each rune kind of seed 003's "Turn Events" table, camelCase. Each ending carries
 * the turn's whole usage: the turn is idle again with it (the seed's internal transition), and the
 * next turn may start before the agent has counted it. `turn_finalized` (older logs) carries none.
 */
export const TurnEnginePayloads = {
  /** The turn's number as its id, the agent (the spawn input's `agentId`) and the input. */
  'turn.started': z.object({ turnId: z.string(), agentId: z.string().optional(), input: z.string() }),
  'turn.assistant_delta': z.object({ content: z.string() }),
  'turn.tool_calls_received': z.object({ callIds: z.array(z.string()) }),
  /** The assistant's whole output, and the usage the provider reported. */
  /** `usage`: the whole turn's, summed over its model responses (tokens, model calls, tool calls, cost). */
  'turn.completed': z.object({
    finalOutput: z.string(),
    usage: BudgetUsage,
    /** `finalOutput` as one entry per model call (see `TurnEngineState.messages`); absent in runes stored before it was kept. */
    messages: z.array(z.string()).optional(),
  }),
  /**
   * The output streamed before the stop; a steer's input, for the next turn, when a steer stopped it;
   * `usage`, the whole turn's (absent in runes stored before a turn's ending was its last rune).
   */
  'turn.interrupted': z.object({ reason: z.string().optional(), partialOutput: z.string(), steerInput: z.string().optional(), usage: BudgetUsage.optional() }),
  /** A model call answered with nothing (a provider chain fell over from it): its usage, counted as a response's. */
  'turn.model_call_spent': z.object({ usage: Usage, model: z.string().optional(), cost: z.number().nonnegative().optional() }),
  /**
   * `errorType` is the event that failed the turn: the model stream's error, or an unrecoverable tool
   * crash; `usage`, the whole turn's (absent in runes stored before a turn's ending was its last rune).
   */
  'turn.error': z.object({ errorType: z.enum(['stream_error', 'tool_crash']), message: z.string(), usage: BudgetUsage.optional() }),
  /** The round's calls, and how each ended when the dispatcher said. */
  'turn.tools_finished': z.object({ callIds: z.array(z.string()), resultSummaries: z.array(ToolResultSummary).optional() }),
} as const;
