import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { uniformInt } from 'pure-rand/distribution/uniformInt';
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';

/**
 * The simulation's one source of randomness, made from a seed number: every choice of a run (a
 * model's answer, a client's action, a crash) draws from it in order, so a seed replays exactly.
 */
export class Random {
  readonly #rng;

  constructor(readonly seed: number) {
    this.#rng = xoroshiro128plus(seed);
  }

  /** A number in [0, 1). */
  next(): number {
    return uniformFloat64(this.#rng);
  }

  /** An integer in [from, to], both included. */
  int(from: number, to: number): number {
    return uniformInt(this.#rng, from, to);
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** One of `items` (which must not be empty). */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('Random.pick: no items to pick from');
    return items[this.int(0, items.length - 1)]!;
  }

  /** One of the keys, each as likely as its weight says: `weighted({a: 3, b: 1})` is `a` 3 times in 4. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const entries = Object.entries(weights) as [K, number][];
    const total = entries.reduce((sum, [, weight]) => sum + weight, 0);
    let roll = this.next() * total;
    for (const [key, weight] of entries) {
      roll -= weight;
      if (roll < 0) return key;
    }
    return entries[entries.length - 1]![0];
  }

  /** A new generator drawn from this one: a part of the world with a sequence of its own. */
  fork(): Random {
    return new Random(this.int(0, 0x7fffffff));
  }

  /** A fresh id of `length` lowercase hex digits, from the seed. */
  hex(length = 8): string {
    let text = '';
    while (text.length < length) text += this.int(0, 0xffff).toString(16).padStart(4, '0');
    return text.slice(0, length);
  }
}
