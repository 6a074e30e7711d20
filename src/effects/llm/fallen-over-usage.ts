import type { ModelPart } from './model-types.js';

type Finish = Extract<ModelPart, { type: 'finish' }>;
type UsageRecord = Readonly<Record<string, number | undefined>>;

/**
 * What the answers a provider chain fell over from used: an empty answer (no text, no tool call)
 * is a call the provider answered, and billed, though the chain takes the next provider's answer.
 * Each is emitted as it comes (a `spent` output); this sum is the record a failed call's error keeps.
 */
export interface FallenOverUsage {
  /** How many such answers. */
  calls: number;
  /** Their usage records, summed key by key. */
  usage: Record<string, number>;
}

const sum = (into: Record<string, number>, usage: UsageRecord | undefined): Record<string, number> => {
  for (const [key, value] of Object.entries(usage ?? {})) if (typeof value === 'number') into[key] = (into[key] ?? 0) + value;
  return into;
};

/** `fallen` with one more empty answer, of this finish part (if it had one). */
export const addFallenOver = (fallen: FallenOverUsage, finish: Finish | undefined): FallenOverUsage => ({
  calls: fallen.calls + 1,
  usage: sum({ ...fallen.usage }, finish?.usage),
});

/** The usage record of the answers fallen over from, `modelCalls` their number; none if none. */
export const fallenOverUsage = (fallen: FallenOverUsage): Record<string, number> | undefined =>
  fallen.calls === 0 ? undefined : { ...fallen.usage, modelCalls: fallen.calls };
