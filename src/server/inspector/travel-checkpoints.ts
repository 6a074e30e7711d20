/** Seqs a checkpoint may be kept at: every this many runes of a stream (the time travel's fold page, too). */
export const CHECKPOINT_EVERY = 1000;

/** A stream's state after one of its runes. */
export interface Checkpoint {
  readonly seq: number;
  readonly state: unknown;
}

/**
 * The states time travel folded on its way, kept so the next request near them folds from there:
 * each stream's state at every {@link CHECKPOINT_EVERY}th seq a fold passed, at most `max` of them
 * in all, the least recently used dropped first. A log never changes a seq's rune, so a kept
 * state stays right.
 */
export class TravelCheckpoints {
  readonly #kept = new Map<string, Checkpoint>();

  constructor(readonly max: number) {}

  /** How many states it holds. */
  get size(): number {
    return this.#kept.size;
  }

  /** The kept state of `stream` nearest at or before `seq`, after `after` (a start the caller already has). */
  nearest(stream: string, seq: number, after: number): Checkpoint | undefined {
    for (let at = seq - (seq % CHECKPOINT_EVERY); at > after; at -= CHECKPOINT_EVERY) {
      const key = `${at}\u0000${stream}`;
      const kept = this.#kept.get(key);
      if (kept === undefined) continue;
      this.#kept.delete(key); // most recently used: last
      this.#kept.set(key, kept);
      return kept;
    }
    return undefined;
  }

  /** Keeps the state of `stream` after rune `seq`, if `seq` is a checkpoint's. */
  keep(stream: string, seq: number, state: unknown): void {
    if (this.max === 0 || seq % CHECKPOINT_EVERY !== 0) return;
    const key = `${seq}\u0000${stream}`;
    this.#kept.delete(key);
    this.#kept.set(key, { seq, state });
    if (this.#kept.size > this.max) this.#kept.delete(this.#kept.keys().next().value!);
  }
}
