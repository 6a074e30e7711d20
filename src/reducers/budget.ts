import { z } from 'zod';

const Count = z.number().int().nonnegative();
const Amount = z.number().nonnegative();

/**
 * What an agent or a conversation has used (seed 003 INV-AGENT-BUDGET): tokens summed over every
 * model response, model calls, tool calls, wall-clock time of its turns, and cost when a price
 * table is given. Every field counts up from 0.
 */
export const Usage = z.object({
  inputTokens: Count,
  outputTokens: Count,
  modelCalls: Count,
  toolCalls: Count,
  wallClockMs: Count,
  /** In the price table's currency; absent when no price table is configured. */
  cost: Amount.optional(),
});
export type Usage = z.infer<typeof Usage>;

/** Limits on {@link Usage}, per agent or per conversation; a dimension left out has no limit. */
export const Budget = z.strictObject({
  inputTokens: Count.optional(),
  outputTokens: Count.optional(),
  modelCalls: Count.optional(),
  toolCalls: Count.optional(),
  wallClockMs: Count.optional(),
  cost: Amount.optional(),
});
export type Budget = z.infer<typeof Budget>;

/** A model's prices per million tokens, by model name: what `Usage.cost` is computed from. */
export const PriceTable = z.record(z.string().min(1), z.strictObject({ inputPerMillion: Amount, outputPerMillion: Amount }));
export type PriceTable = z.infer<typeof PriceTable>;
