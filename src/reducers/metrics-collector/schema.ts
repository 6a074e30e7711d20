import { z } from 'zod';

/** Seed 002 "MetricsCollector"; no state is terminal. */
export const MetricsCollectorStateName = z.enum(['INITIALIZING', 'RUNNING', 'ERROR', 'RECOVERING', 'ARCHIVING']);
export type MetricsCollectorStateName = z.infer<typeof MetricsCollectorStateName>;

/** The collector's state: its state name plus the error that stopped it. */
export const MetricsCollectorState = z.object({
  value: MetricsCollectorStateName,
  /** The error of the last failure that reported one; cleared once the collector recovers. */
  error: z.string().optional(),
});
export type MetricsCollectorState = z.infer<typeof MetricsCollectorState>;

/** The diagram's edges as events; the two failures may say what went wrong. */
export const MetricsCollectorEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('initialized') }),
  z.object({ type: z.literal('binding_missing'), error: z.string().optional() }),
  z.object({ type: z.literal('runtime_error'), error: z.string().optional() }),
  z.object({ type: z.literal('retry') }),
  z.object({ type: z.literal('recovered') }),
  z.object({ type: z.literal('archive_triggered') }),
  z.object({ type: z.literal('archive_done') }),
]);
export type MetricsCollectorEvent = z.infer<typeof MetricsCollectorEvent>;
