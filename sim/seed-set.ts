/**
 * CI's fixed seeds (`test/sim/seeds.test.ts` runs each for {@link CI_STEPS} steps): seeds that pass,
 * and for each known defect a seed that finds it, expected to fail with that defect until it is
 * fixed (then its entry flips to `pass`). A long run (`npm run simulate -- --seeds 1000`) finds
 * more; a new failure's seed joins this list.
 */
export const CI_STEPS = 200;

export interface SeedExpectation {
  readonly seed: number;
  /** `'pass'`, or the name of the known defect (see `KNOWN_DEFECTS`) it is expected to fail with. */
  readonly expect: string;
}

export const CI_SEEDS: readonly SeedExpectation[] = [
  ...[37, 53, 65, 79, 84, 91, 96, 115, 76, 100, 134, 3, 123].map((seed) => ({ seed, expect: 'pass' })),
  { seed: 8, expect: 'react-escapes-budget' },
  { seed: 9, expect: 'react-escapes-budget' },
  { seed: 12, expect: 'agent-runs-two-turns' },
  { seed: 1, expect: 'budget-overrun-by-running-turns' },
  { seed: 293, expect: 'turn-started-while-suspended' },
  { seed: 172, expect: 'turn-left-streaming-at-suspension' },
  { seed: 113, expect: 'close-leaves-work-open' },
  { seed: 74, expect: 'react-message-left-streaming' },
];
