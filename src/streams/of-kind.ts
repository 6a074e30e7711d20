import { filter, type OperatorFunction } from 'rxjs';
import type { EventObject } from '../reducers/machine.js';
import type { Rune } from '../reducers/rune.js';

/**
 * The events a rune of kind `Kind` may carry, out of `Event`: the member whose `type` is `Kind`
 * when `Kind` is one of the event types, else all of `Event` (a seed kind such as `tool.result`
 * names several events; a spawn kind names the spawn). Untyped events (`type: string`) stay as they are.
 */
export type EventOfKind<Event extends EventObject, Kind extends string> = string extends Event['type']
  ? Event
  : Kind extends Event['type']
    ? Extract<Event, { type: Kind }>
    : Event;

/** A rune `R` known to be of kind `Kind`: its `kind` is `Kind` and its event narrowed by {@link EventOfKind}. */
export type RuneOfKind<R, Kind extends string> = R extends Rune<infer Event, infer StateName> ? Rune<EventOfKind<Event, Kind>, StateName> & { kind: Kind } : never;

/**
 * Keeps the runes of the given kinds and narrows their type (redux-observable's `ofType`: variadic,
 * narrowing by `Extract`).
 *
 * 1. A rune passes when its `kind` is one of `kinds`.
 * 2. Its `kind` is typed as those kinds. Where a kind is also an event type of the rune's machine
 *    (a table row without its own `kind` appends the event type), the `event` narrows to that
 *    member of the union. A seed kind that differs from the event type (`turn.interrupted`,
 *    `tool.result`, the spawn's `tool.call`) leaves the event as it was: narrow it by `event.type` instead.
 *
 * Sound because no table row gives an event a kind that is another event's type (a test holds
 * every shipped machine to it). Completion and errors of the source pass through.
 *
 * ## Example
 * ```ts
 * import { of } from 'rxjs';
 * import { chatActor, ofKind, ofMachine, type Rune } from 'runestream';
 *
 * const runes: Rune[] = [
 *   { stream: 'chat-1', seq: 2, machine: 'chat-actor', kind: 'Ping', event: { type: 'Ping' }, at: 0 },
 *   { stream: 'chat-1', seq: 3, machine: 'chat-actor', kind: 'Pause', event: { type: 'Pause', reason: 'later' }, at: 1 },
 * ];
 * of(...runes).pipe(ofMachine(chatActor), ofKind('Pause')).subscribe((rune) => console.log(rune.seq, rune.event.reason));
 * // Logs:
 * // 3 later
 * ```
 *
 * @see {@link ofMachine} to keep runes by machine, which types their events first.
 */
export function ofKind<R extends Rune<EventObject>, Kind extends string>(...kinds: [Kind, ...Kind[]]): OperatorFunction<R, RuneOfKind<R, Kind>> {
  const wanted = new Set<string>(kinds);
  return filter((rune: R): rune is R & RuneOfKind<R, Kind> => wanted.has(rune.kind)) as OperatorFunction<R, RuneOfKind<R, Kind>>;
}
