import { map, type OperatorFunction } from 'rxjs';
import type { EventObject } from '../reducers/machine.js';
import type { DispatchCommand } from './epic.js';

/**
 * Each event a timer made, as a command to `stream` saying so (`by: 'timer'`, its rune's origin):
 * for a `durableDeadline` piped through other operators before an effect emits it. One given to
 * `stateEffects` as it is needs none: the effect host knows it for a deadline.
 */
export const firedByTimer = <E extends EventObject>(stream: string): OperatorFunction<E, DispatchCommand> =>
  map((event): DispatchCommand => ({ stream, event: event as DispatchCommand['event'], by: 'timer' }));
