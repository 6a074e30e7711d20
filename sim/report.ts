import { defectOf } from './defects.js';
import type { Failure, SeedResult } from './run-seed.js';

/** One failure as a person reads it: the oracle and what it found, the known defect it is (or that it is new), the actions and runes that led there. */
function formatOne(failure: Failure, seedSteps: number): string {
  const defect = defectOf(failure);
  return [
    `  step ${failure.step}${failure.step > seedSteps ? ' (at the end, once quiet)' : ''}: ${failure.oracle}: ${failure.message}`,
    defect === undefined ? '    a new failure: no known defect matches it' : `    known defect ${defect.name}: ${defect.description}`,
    '    the last actions:',
    ...failure.actions.map((action) => `      ${action}`),
    `    the runes that led there${failure.stream === undefined ? '' : ` (${failure.stream})`}:`,
    ...failure.runes.map((rune) => `      ${rune}`),
  ].join('\n');
}

/** A seed's failures as a person reads them, with the command that replays it. */
export function formatFailures(result: SeedResult, steps: number): string {
  if (result.failures.length === 0) return `seed ${result.seed}: ok`;
  const names = result.failures.map((failure) => defectOf(failure)?.name ?? 'a new failure');
  return [
    `seed ${result.seed} failed (${names.join(', ')}):`,
    ...result.failures.map((failure) => formatOne(failure, result.steps)),
    `  replay: npm run simulate -- --seeds 1 --from ${result.seed} --steps ${steps}`,
  ].join('\n');
}

/** The names of what a seed found: each known defect's, and `new` for a new failure. */
export const foundIn = (result: SeedResult): string[] => result.failures.map((failure) => defectOf(failure)?.name ?? 'new');
