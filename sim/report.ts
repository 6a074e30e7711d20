import { defectOf } from './defects.js';
import type { SeedResult } from './run-seed.js';

/** A failed seed as a person reads it: the seed, the step, what was found, the actions and runes that led there, and how to replay it. */
export function formatFailure(result: SeedResult, steps: number): string {
  const { failure } = result;
  if (failure === undefined) return `seed ${result.seed}: ok`;
  const defect = defectOf(failure);
  return [
    `seed ${result.seed} failed at step ${failure.step}${failure.step > result.steps ? ' (at the end, once quiet)' : ''}: ${failure.oracle}`,
    `  ${failure.message}`,
    ...(defect === undefined ? ['  a new failure: no known defect matches it'] : [`  known defect ${defect.name}: ${defect.description}`]),
    '  the last actions:',
    ...failure.actions.map((action) => `    ${action}`),
    `  the runes that led there${failure.stream === undefined ? '' : ` (${failure.stream})`}:`,
    ...failure.runes.map((rune) => `    ${rune}`),
    `  replay: npm run simulate -- --seeds 1 --from ${result.seed} --steps ${steps}`,
  ].join('\n');
}
