import { z } from 'zod';

/**
 * A rune: one accepted event in the durable log.
 * `seq` counts from 1 per stream without gaps; `kind` is the seed's rune kind or the event type;
 * `from` / `to` are the state names around a finite machine's transition; `at` is scheduler time (ms).
 * The first rune of a stream is its spawn: `event` is `{ type: 'spawn', input }` and `kind` the
 * machine's `spawnKind`.
 */
export const Rune = z.object({
  stream: z.string().min(1),
  seq: z.number().int().positive(),
  machine: z.string().min(1),
  kind: z.string().min(1),
  event: z.looseObject({ type: z.string() }),
  from: z.string().optional(),
  to: z.string().optional(),
  at: z.number(),
});
export type Rune = z.infer<typeof Rune>;

/** The event of a stream's first rune. */
export const SPAWN_EVENT_TYPE = 'spawn';
