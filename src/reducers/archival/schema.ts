import { z } from 'zod';

/** Seed 002 "ArchivalService"; no state is terminal. */
export const ArchivalStateName = z.enum(['IDLE', 'ARCHIVING', 'WRITING_TO_R2', 'COMPLETED', 'ERROR', 'RETRYING']);
export type ArchivalStateName = z.infer<typeof ArchivalStateName>;

/** The archival run's state: its state name, the writes tried and the last write error. */
export const ArchivalState = z.object({
  value: ArchivalStateName,
  /** Writes to R2 tried in this run (the first write and every rewrite); reset when a run starts. */
  attempts: z.number().int().nonnegative(),
  /** The error of the last failed write that reported one; reset when a run starts. */
  error: z.string().optional(),
});
export type ArchivalState = z.infer<typeof ArchivalState>;

/** The diagram's edges as events; a failed write may say why. */
export const ArchivalEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('start') }),
  z.object({ type: z.literal('serialized') }),
  z.object({ type: z.literal('write_succeeded') }),
  z.object({ type: z.literal('write_failed'), error: z.string().optional() }),
  z.object({ type: z.literal('retry') }),
  z.object({ type: z.literal('rewrite') }),
  z.object({ type: z.literal('reset') }),
]);
export type ArchivalEvent = z.infer<typeof ArchivalEvent>;
