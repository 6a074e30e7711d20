import { foldRune } from '../reducers/fold.js';
import type { Rune } from '../reducers/rune.js';
import type { CommitQueue } from './commit-queue.js';
import type { Instance, Instances } from './instances.js';
import type { RuneStore } from './store.js';

/** What the follower tells subscribers with: the engine's listeners. */
export interface FollowerOutlets {
  /** Tells `state$` subscribers of a stream its instance's durable state (each seq is emitted once). */
  state(stream: string, instance: Instance): void;
  /** Whether a stream has `state$` subscribers. */
  watched(stream: string): boolean;
  /** Tells `runes$` subscribers of a stream, and of every stream, of a rune. */
  rune(rune: Rune): void;
}

/**
 * Folds another writer's durable rune, the one right after `instance`'s last (all of whose runes
 * are durable), into it and publishes it as if committed here: snapshots, subscribers, release.
 */
export function foldTheirs(instance: Instance, rune: Rune, commits: CommitQueue<Instance>): void {
  instance.state = foldRune(instance.machine, instance.state, rune.seq, rune.event);
  instance.seq = rune.seq;
  if (rune.at > instance.at) instance.at = rune.at;
  commits.publish(instance, rune, instance.state);
}

/**
 * Brings the runes other writers append to the store to an engine, from the store's `tail`, so
 * its instances stay current and its `state$` and `runes$` carry every durable rune in seq order.
 *
 * 1. The engine's own runes (the tail names their writer) are its commit queue's business.
 * 2. A rune of a stream in memory whose own runes are all durable, and that follows them, is
 *    folded into the instance (`foldRune`) and published as if committed here: snapshots,
 *    subscribers, terminal release. A rune that skips ahead (runes missed) drops the instance:
 *    the next use hydrates it.
 * 3. While the engine has runes of the stream on their way to the store, another writer's rune
 *    waits behind them, published once they are (it then follows them), or once they lost the
 *    seq race to it (the engine rolled the instance back to its durable state: the rune follows
 *    that) or were refused otherwise (the instance left memory: the rune is told as in 4).
 * 4. A rune of a stream not in memory goes to the stream's `runes$` subscribers and to epics at
 *    once; a load in progress folds it in. If the stream has `state$` subscribers, it is loaded
 *    and its state told: the states that runes heard during that load passed through are skipped
 *    (as a subscriber that came late skips them), while `runes$` carries every rune.
 */
export class StoreFollower {
  readonly #writer: string;
  readonly #instances: Instances;
  readonly #commits: CommitQueue<Instance>;
  readonly #outlets: FollowerOutlets;
  /** Per stream, the other writers' runes waiting for this engine's own runes of it to settle. */
  readonly #behind = new Map<string, Rune[]>();
  readonly #stop: () => void;

  constructor(store: RuneStore & Required<Pick<RuneStore, 'tail'>>, writer: string, instances: Instances, commits: CommitQueue<Instance>, outlets: FollowerOutlets) {
    this.#writer = writer;
    this.#instances = instances;
    this.#commits = commits;
    this.#outlets = outlets;
    this.#stop = store.tail((rune, _position, from) => {
      if (from !== this.#writer) this.#heard(rune);
    });
  }

  /** Whether another writer's rune waits for this engine's own runes to settle: the engine then calls {@link settled}. */
  get waiting(): boolean {
    return this.#behind.size > 0;
  }

  /** Stops following the store. */
  stop(): void {
    this.#stop();
    this.#behind.clear();
  }

  /**
   * A rune of `stream` was published or refused by this engine's commit queue: the other writers'
   * runes waiting behind this engine's now follow it, or take the place of the refused ones.
   */
  settled(stream: string): void {
    const behind = this.#behind.get(stream);
    if (behind === undefined) return;
    const instance = this.#instances.get(stream);
    if (instance !== undefined && instance.seq !== instance.durableSeq) return; // more of its own on their way
    this.#behind.delete(stream);
    for (const rune of behind) this.#heard(rune);
  }

  #heard(rune: Rune): void {
    const { stream } = rune;
    const behind = this.#behind.get(stream);
    if (behind !== undefined) {
      behind.push(rune);
      return;
    }
    const instance = this.#instances.get(stream);
    if (instance === undefined) {
      this.#loose(rune);
      return;
    }
    if (rune.seq <= instance.durableSeq) return; // folded already (hydrated after it was committed)
    if (instance.seq !== instance.durableSeq) {
      this.#behind.set(stream, [rune]);
      return;
    }
    if (rune.seq !== instance.durableSeq + 1) {
      // Runes missed: the instance cannot be trusted. The next use hydrates what the store holds.
      this.#instances.forget(stream);
      this.#loose(rune);
      return;
    }
    foldTheirs(instance, rune, this.#commits);
  }

  /** A rune of a stream not in memory: told to its runes' subscribers; its state's, through a load. */
  #loose(rune: Rune): void {
    const { stream } = rune;
    this.#instances.arrived(rune);
    this.#commits.whilePublishing(() => this.#outlets.rune(rune));
    if (!this.#outlets.watched(stream)) return;
    // A load in progress folds the rune in; so does a new one. Its subscribers get the state then.
    const loaded = this.#instances.load(stream);
    if (loaded instanceof Promise) {
      loaded.then(
        (instance) => instance !== undefined && this.#outlets.state(stream, instance),
        () => {}, // the next use of the stream meets the error
      );
    } else this.#outlets.state(stream, loaded);
  }
}
