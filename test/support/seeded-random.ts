import { Random } from '../../sim/random.js';

/**
 * Numbers in [0, 1), the same sequence for the same seed, for tests and scripts that must do the
 * same on every run: the simulation's generator (`sim/random.ts`, pure-rand's xoroshiro128+).
 */
export function seededRandom(seed: number): () => number {
  const random = new Random(seed);
  return () => random.next();
}
