import { describe, expect, it } from 'vitest';
import { KNOWN_DEFECTS } from '../../sim/defects.js';
import { formatFailures, foundIn } from '../../sim/report.js';
import { runSeed } from '../../sim/run-seed.js';
import { CI_SEEDS, CI_STEPS } from '../../sim/seed-set.js';

/**
 * CI's fixed seeds: each passes, or fails with the known defect it was kept for (so the fix of
 * that defect flips it, and this test says so); any other outcome fails with the seed's report.
 */
describe("the simulation's fixed seeds", () => {
  it('names only known defects', () => {
    const names = new Set(KNOWN_DEFECTS.map((defect) => defect.name));
    for (const { seed, expect: expected } of CI_SEEDS) if (expected !== 'pass') expect(names.has(expected), `seed ${seed}: ${expected}`).toBe(true);
    for (const defect of KNOWN_DEFECTS)
      expect(
        CI_SEEDS.some((entry) => entry.expect === defect.name),
        `a seed that finds ${defect.name}`,
      ).toBe(true);
  });

  it.each(CI_SEEDS)('seed $seed: $expect', async ({ seed, expect: expected }) => {
    const result = await runSeed(seed, { steps: CI_STEPS });
    const found = foundIn(result);
    const report = formatFailures(result, CI_STEPS);
    expect(found, `no new failure:\n${report}`).not.toContain('new');
    if (expected === 'pass') expect(found, `a passing seed finds nothing:\n${report}`).toEqual([]);
    else expect(found, `seed ${seed} finds ${expected} (fixed? then mark it 'pass' in sim/seed-set.ts):\n${report}`).toContain(expected);
  });
});
