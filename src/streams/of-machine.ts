import { filter, type OperatorFunction } from 'rxjs';
import type { AnyMachine, EventObject } from '../reducers/machine.js';
import { isRuneOf, type Rune, type RuneOf } from '../reducers/rune.js';

/**
 * Keeps the runes of the given machines and types them as those machines' runes (redux-observable's
 * `ofType`, by machine).
 *
 * 1. A rune passes when its `machine` is the `id` of one of `machines`.
 * 2. It comes out as {@link RuneOf}: its `event` is one of the machine's events or its spawn
 *    (`{ type: 'spawn', input }`), and `from` / `to` are the machine's state names. With several
 *    machines it is a union; tell its members apart on the untyped rune with `isRuneOf`
 *    before narrowing (machine ids are plain strings, so the union has no type-level tag).
 *
 * Completion and errors of the source pass through; unsubscribing unsubscribes the source.
 *
 * ## Example
 * ```ts
 * import { of } from 'rxjs';
 * import { ofMachine, toolCall, type Rune } from 'runestream';
 *
 * const runes: Rune[] = [
 *   { stream: 'call-1', seq: 2, machine: 'tool-call', kind: 'tool.denied', event: { type: 'denied', reason: 'no' }, at: 0 },
 *   { stream: 'chat-1', seq: 2, machine: 'chat-actor', kind: 'InactivityTimeout', event: { type: 'InactivityTimeout' }, at: 0 },
 * ];
 * of(...runes).pipe(ofMachine(toolCall)).subscribe((rune) => {
 *   if (rune.event.type === 'denied') console.log(rune.stream, rune.event.reason); // `reason` is typed
 * });
 * // Logs:
 * // call-1 no
 * ```
 *
 * @see {@link ofKind} to keep runes by kind.
 */
export function ofMachine<Machines extends [AnyMachine, ...AnyMachine[]]>(...machines: Machines): OperatorFunction<Rune<EventObject>, RuneOf<Machines[number]>> {
  return filter((rune): rune is RuneOf<Machines[number]> => machines.some((machine) => isRuneOf(machine, rune)));
}
