import { z } from 'zod';
import { isStorableText } from './value-limits.js';

/** The longest identity id or epic name an origin records: it is stored with every rune. */
export const MAX_ORIGIN_NAME = 256;
const STORABLE = { message: 'has a NUL character or a lone surrogate, which no store keeps' };

/**
 * What an event came from: every rune the engine appends records it, so a log tells the inputs it
 * recorded (a client's request, a model's answer, a tool's result, a timer) from what the engine
 * derived from them (an epic's reaction), which replay and the studio build on.
 *
 * - `client`: a caller of `dispatch` or `spawn`: an app's own code, or a server's connection, with
 *   the id of the identity it authenticated as (`identity`), when the server has one;
 * - `epic`: an epic, by name (its function's name, else its position), reacting to runes;
 * - `timer`, `model`, `tool`: an epic's timer that fired (a durable deadline), a model call's
 *   answer, a tool run's result: the epic that ran it is named.
 */
export const RuneOrigin = z.discriminatedUnion('by', [
  z.object({ by: z.literal('client'), identity: z.string().min(1).max(MAX_ORIGIN_NAME).refine(isStorableText, STORABLE).optional() }),
  z.object({ by: z.enum(['epic', 'timer', 'model', 'tool']), epic: z.string().min(1).max(MAX_ORIGIN_NAME).refine(isStorableText, STORABLE) }),
]);
export type RuneOrigin = z.infer<typeof RuneOrigin>;

/** What in an epic made a command, when not the epic's reaction itself: its `by` on the rune. */
export type EffectSource = 'timer' | 'model' | 'tool';

/** The origin of a dispatch or spawn that names none: the engine's caller. */
export const CALLER_ORIGIN: RuneOrigin = Object.freeze({ by: 'client' });

/** A client's origin: with its identity's id when it has one (one object per client, not per event). */
export const clientOrigin = (identity?: string): RuneOrigin => (identity === undefined ? CALLER_ORIGIN : Object.freeze({ by: 'client', identity }));
