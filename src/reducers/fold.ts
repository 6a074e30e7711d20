import type { AnyMachine, EventObject } from './machine.js';
import type { AnyRuneEvent } from './rune.js';

/**
 * The state of a stream after one more rune: the fold every reader of a log shares (the engine
 * hydrating an instance, the client's stream view), so they cannot disagree on what a log means.
 *
 * 1. Seq 1 is the stream's spawn: its state is `machine.initial(event.input)`, whatever came before.
 * 2. Every later rune is `machine.transition(state, event)`: pure and total, so a stored event that
 *    no longer applies (a machine changed since) leaves the state as it is rather than throwing.
 *
 * ## Example
 * ```ts
 * import { chatActor, foldRune } from 'runestream';
 * let state = foldRune(chatActor, undefined, 1, { type: 'spawn' });
 * state = foldRune(chatActor, state, 2, { type: 'Pause', reason: 'lunch' });
 * console.log(state);
 * // Logs: { value: 'paused', reason: 'lunch' }
 * ```
 *
 * @see foldEvents, which folds a page of a stream's events with it.
 */
export function foldRune(machine: AnyMachine, state: unknown, seq: number, event: AnyRuneEvent): unknown {
  return seq === 1 ? machine.initial((event as { input?: unknown }).input) : machine.transition(state, event as EventObject);
}

/**
 * The state after folding `events`, the events of a stream's runes `seq + 1` onward, into `state`,
 * its state after rune `seq` (`undefined` for seq 0, before its spawn). How hydration goes from a
 * snapshot (or from nothing) to the state of the stream's last rune: `seq + events.length`.
 *
 * ## Example
 * ```ts
 * import { chatActor, foldEvents } from 'runestream';
 * const state = foldEvents(chatActor, undefined, 0, [{ type: 'spawn' }, { type: 'Pause' }, { type: 'Cancel', reason: 'user' }]);
 * console.log(state);
 * // Logs: { value: 'cancelled', reason: 'user' }
 * ```
 */
export function foldEvents(machine: AnyMachine, state: unknown, seq: number, events: readonly AnyRuneEvent[]): unknown {
  for (let i = 0; i < events.length; i++) state = foldRune(machine, state, seq + i + 1, events[i]!);
  return state;
}
