import { Subject } from 'rxjs';
import type { Rune } from '../../reducers/rune.js';
import { runeChannel } from '../diagnostics.js';
import type { Instance } from './instance.js';
import { KeyedListeners } from '../keyed-listeners.js';

/**
 * Where an engine's durable states and runes go out: each stream's `state$` and `runes$`
 * subscribers, the subscribers of every rune (`runes$()`, the epics), and the diagnostics
 * channel. The commit queue tells it of the engine's own runes, the store follower of other
 * writers': both through {@link rune}, so a rune reaches the same listeners whoever wrote it.
 */
export class Outlets {
  /** Per stream, the instance at each durable rune: its listeners read its durable state and seq. */
  readonly states = new KeyedListeners<Instance>();
  /** Per stream, its durable runes. */
  readonly runes = new KeyedListeners<Rune>();
  /** Every durable rune of every stream. */
  readonly all = new Subject<Rune>();

  /** Tells `stream`'s `state$` subscribers of its instance's durable state. */
  state(stream: string, instance: Instance): void {
    this.states.next(stream, instance);
  }

  /** Whether `stream` has `state$` subscribers. */
  watched(stream: string): boolean {
    return this.states.has(stream);
  }

  /** Tells a durable rune to its stream's `runes$` subscribers, to every rune's, and to the diagnostics channel. */
  rune(rune: Rune): void {
    // The hot path: no subject call nobody hears.
    this.runes.next(rune.stream, rune);
    if (this.all.observed) this.all.next(rune);
    if (runeChannel.hasSubscribers) runeChannel.publish(rune);
  }

  /** Completes every subscriber: the engine closed. */
  complete(): void {
    this.all.complete();
    this.states.complete();
    this.runes.complete();
  }
}
