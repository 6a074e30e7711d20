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
  { seed: 16, expect: 'pass' },
  { seed: 31, expect: 'pass' },
  { seed: 35, expect: 'pass' },
  { seed: 50, expect: 'pass' },
  { seed: 58, expect: 'pass' },
  { seed: 61, expect: 'pass' },
  { seed: 75, expect: 'pass' },
  { seed: 83, expect: 'pass' },
  { seed: 3, expect: 'plan-hangs-on-retry' },
  { seed: 40, expect: 'plan-hangs-on-retry' },
  { seed: 22, expect: 'chat-paused-while-working' },
  { seed: 72, expect: 'chat-paused-while-working' },
  { seed: 52, expect: 'react-escapes-budget' },
  { seed: 73, expect: 'react-escapes-budget' },
  { seed: 34, expect: 'close-leaves-work-open' },
];
