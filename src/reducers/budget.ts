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

/** The dimensions of a {@link Budget}, in the order they are checked. */
export const BudgetDimension = z.enum(['inputTokens', 'outputTokens', 'modelCalls', 'toolCalls', 'wallClockMs', 'cost']);
export type BudgetDimension = z.infer<typeof BudgetDimension>;

/** A dimension at or over its limit: which one, what was used, and the limit. */
export const BudgetOverrun = z.object({ dimension: BudgetDimension, used: Amount, limit: Amount });
export type BudgetOverrun = z.infer<typeof BudgetOverrun>;

/** Nothing used yet. */
export const NO_USAGE: Usage = Object.freeze({ inputTokens: 0, outputTokens: 0, modelCalls: 0, toolCalls: 0, wallClockMs: 0 });

/** `a` and `b` summed, dimension by dimension; `cost` is present when either has it. */
export function addUsage(a: Usage, b: Partial<Usage>): Usage {
  const sum: Usage = {
    inputTokens: a.inputTokens + (b.inputTokens ?? 0),
    outputTokens: a.outputTokens + (b.outputTokens ?? 0),
    modelCalls: a.modelCalls + (b.modelCalls ?? 0),
    toolCalls: a.toolCalls + (b.toolCalls ?? 0),
    wallClockMs: a.wallClockMs + (b.wallClockMs ?? 0),
  };
  if (a.cost !== undefined || b.cost !== undefined) sum.cost = (a.cost ?? 0) + (b.cost ?? 0);
  return sum;
}

/** What was used since `before`: `now` less `before`, dimension by dimension (never below 0); `cost` when `now` has it. */
export function usageSince(now: Usage, before: Usage): Usage {
  const since = (a: number, b: number): number => Math.max(0, a - b);
  const used: Usage = {
    inputTokens: since(now.inputTokens, before.inputTokens),
    outputTokens: since(now.outputTokens, before.outputTokens),
    modelCalls: since(now.modelCalls, before.modelCalls),
    toolCalls: since(now.toolCalls, before.toolCalls),
    wallClockMs: since(now.wallClockMs, before.wallClockMs),
  };
  if (now.cost !== undefined) used.cost = since(now.cost, before.cost ?? 0);
  return used;
}

const count = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.floor(value) : 0);

/**
 * One model response as usage: its tokens from the provider's usage record (`inputTokens`,
 * `outputTokens`, as `modelCall$` normalizes the AI SDK's), its model calls (one, or the record's
 * `modelCalls` when a provider chain fell over from empty answers to get it), and its tool calls;
 * `cost` when the response says it.
 */
export const responseUsage = (usage: Readonly<Record<string, unknown>> | undefined, toolCalls: number, cost: number | undefined): Usage => ({
  inputTokens: count(usage?.inputTokens),
  outputTokens: count(usage?.outputTokens),
  modelCalls: Math.max(1, count(usage?.modelCalls)),
  toolCalls,
  wallClockMs: 0,
  ...(cost === undefined ? {} : { cost }),
});

/**
 * What a response of `model` costs by `prices` (per million tokens), or `undefined` when the table
 * has no such model.
 */
export function costOf(prices: PriceTable | undefined, model: string | undefined, usage: Readonly<Record<string, unknown>> | undefined): number | undefined {
  const price = model === undefined ? undefined : prices?.[model];
  if (price === undefined) return undefined;
  return (count(usage?.inputTokens) * price.inputPerMillion + count(usage?.outputTokens) * price.outputPerMillion) / 1_000_000;
}

/** One response of `model` as usage ({@link responseUsage}), priced by `prices` ({@link costOf}). */
export const pricedResponse = (prices: PriceTable | undefined, model: string | undefined, usage: Readonly<Record<string, unknown>> | undefined, toolCalls = 0): Usage =>
  responseUsage(usage, toolCalls, costOf(prices, model, usage));

/**
 * The first dimension of `budget` that `usage` has reached (`used >= limit`: nothing is left of
 * it), or `undefined` while every limit still has room. A dimension the budget leaves out has no
 * limit; `cost` counts as 0 when it is unknown. `strict` dimensions count only when used is past
 * the limit (`used > limit`): what a step is about to spend, which may use its limit up.
 */
export function budgetOverrun(usage: Usage, budget: Budget | undefined, strict: readonly BudgetDimension[] = []): BudgetOverrun | undefined {
  if (budget === undefined) return undefined;
  for (const dimension of BudgetDimension.options) {
    const limit = budget[dimension];
    if (limit === undefined) continue;
    const used = usage[dimension] ?? 0;
    if (strict.includes(dimension) ? used > limit : used >= limit) return { dimension, used, limit };
  }
  return undefined;
}

/** An overrun in words, for reasons: `toolCalls 3 of 3` (the dimension, used, and its limit). */
export const describeOverrun = (overrun: BudgetOverrun): string => `${overrun.dimension} ${overrun.used} of ${overrun.limit}`;
