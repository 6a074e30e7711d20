import type { Rune } from '../../reducers/rune.js';
import type { RuneOrigin } from '../../reducers/rune-origin.js';
import type { DispatchSink } from '../submit.js';
import type { Instance } from './instance.js';

/** An event dispatched to a stream while it is loaded or brought up to the store's head: applied, in order, once it is. */
export interface WaitingEvent {
  readonly event: unknown;
  readonly dispatchedAt: number;
  readonly origin: RuneOrigin;
  readonly sink: DispatchSink<any>;
  readonly token: unknown;
}

/**
 * A stream's home while it is not simply at rest in memory: being loaded (hydrated, or claimed by a
 * spawn), brought up to the store's head after a lost seq race, or holding other writers' runes
 * until its own are settled. A stream at rest has none (a million idle streams cost their
 * instances, nothing more); a home is made when one of these begins and dropped when all are over.
 */
export interface StreamHome {
  /** The load, claim or catch-up in progress: what an event dispatched now waits for. */
  ready: Promise<Instance | undefined> | undefined;
  /** Whether `ready` brings the instance in memory up to the store's head (a lost seq race). */
  catchingUp: boolean;
  /** The events waiting for `ready`, in the order they came; those before `from` are answered. */
  waiting: WaitingEvent[];
  from: number;
  /** While loading: other writers' runes heard meanwhile, folded on top of what the load read. */
  arrived: Rune[] | undefined;
  /** Other writers' runes heard while this engine's own runes of the stream were on their way: heard again once those settle. */
  behind: Rune[] | undefined;
}

/** A home with nothing in progress: what a stream gets when something begins. */
export const homeAtRest = (): StreamHome => ({ ready: undefined, catchingUp: false, waiting: [], from: 0, arrived: undefined, behind: undefined });
