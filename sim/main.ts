import { parseArgs } from 'node:util';
import { formatFailures, foundIn } from './report.js';
import { runSeed } from './run-seed.js';

// `npm run simulate -- --seeds N [--from S] [--steps M] [--verbose]`: runs seeds S .. S+N-1 of the
// simulation and reports each failure; exits 1 if any seed failed other than by a known defect.
const { values } = parseArgs({
  options: {
    seeds: { type: 'string', default: '10' },
    from: { type: 'string', default: '1' },
    steps: { type: 'string', default: '200' },
    verbose: { type: 'boolean', default: false },
  },
});
const positive = (name: string, text: string): number => {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0) {
    console.error(`simulate: --${name} must be a whole number, got ${JSON.stringify(text)}`);
    process.exit(2);
  }
  return value;
};
const seeds = positive('seeds', values.seeds);
const from = positive('from', values.from);
const steps = positive('steps', values.steps);

const started = performance.now();
const byDefect = new Map<string, number[]>();
const unknown: number[] = [];
const newLines: string[] = [];
let stepsRun = 0;
let failed = 0;
for (let seed = from; seed < from + seeds; seed++) {
  const result = await runSeed(seed, {
    steps,
    ...(values.verbose
      ? { onStep: (step, record, now) => console.log(`  seed ${seed} step ${step} @${now}: ${record.kind} ${record.stream ?? ''} ${record.outcome ?? ''}`) }
      : {}),
  });
  stepsRun += result.steps;
  if (result.failures.length === 0) {
    if (values.verbose) console.log(`seed ${seed}: ok (${result.steps} steps, ${result.runes} runes, ${result.crashes} crashes)`);
    continue;
  }
  failed++;
  for (const name of foundIn(result)) {
    if (name === 'new') {
      unknown.push(seed);
      newLines.push(`seed ${seed}: ${result.newFailure!.oracle}: ${result.newFailure!.message.slice(0, 200)}`);
    } else byDefect.set(name, [...(byDefect.get(name) ?? []), seed]);
  }
  console.log(formatFailures(result, steps));
}
const minutes = (performance.now() - started) / 60_000;
console.log(
  `simulate: ${seeds} seeds from ${from}, ${stepsRun} steps (${(stepsRun / Math.max(1, seeds)).toFixed(0)} a seed), ${seeds - failed} passed, ${failed} failed; ${(seeds / minutes).toFixed(0)} seeds a minute`,
);
for (const [name, list] of byDefect)
  console.log(`  known defect ${name}: ${list.length} seeds, the first ${list[0]}: ${list.slice(0, 12).join(', ')}${list.length > 12 ? ', ...' : ''}`);
for (const line of newLines) console.log(`  new failure: ${line}`);
process.exit(unknown.length > 0 ? 1 : 0);
