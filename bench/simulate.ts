import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { VirtualTimeScheduler } from 'rxjs';
import { createEngine } from '../src/index.js';
import { sqliteStore } from '../src/sqlite.js';
import { runSeed } from '../sim/run-seed.js';
import { CI_STEPS } from '../sim/seed-set.js';

/** How many seeds, from 1, the figure is taken over. */
const SEEDS = 40;

/**
 * The simulation's speed (information, no bar): seeds a minute, steps and runes a seed, over
 * seeds 1..40 at CI's step count. Its anchor, in the same run: the same number of runes dispatched
 * straight to an engine on a SQLite file under virtual time (chat actors pinged), so the ratio
 * says what the simulated world costs per rune beyond the log's own writes.
 */
export async function benchSimulate(): Promise<boolean> {
  let steps = 0;
  let runes = 0;
  let failed = 0;
  const started = performance.now();
  for (let seed = 1; seed <= SEEDS; seed++) {
    const result = await runSeed(seed, { steps: CI_STEPS });
    steps += result.steps;
    runes += result.runes;
    if (result.failures.length > 0) failed++;
  }
  const simMs = performance.now() - started;

  const dir = mkdtempSync(join(tmpdir(), 'runestream-bench-sim-'));
  const engine = createEngine({ store: sqliteStore(join(dir, 'anchor.db')), scheduler: new VirtualTimeScheduler() });
  const anchorStarted = performance.now();
  const actors = 100;
  for (let i = 0; i < actors; i++) await engine.spawn(`actor-${i}`, 'chat-actor');
  for (let n = actors; n < runes; n += actors) await Promise.all(Array.from({ length: actors }, (_, i) => engine.dispatch(`actor-${i}`, { type: 'Ping' })));
  const anchorMs = performance.now() - anchorStarted;
  await engine.close();
  rmSync(dir, { recursive: true, force: true });

  const perRune = simMs / runes;
  const anchorPerRune = anchorMs / runes;
  console.log(`\nsimulate: ${SEEDS} seeds of up to ${CI_STEPS} steps (information, no bar)`);
  console.log(
    `  ${((SEEDS / simMs) * 60_000).toFixed(0)} seeds a minute; ${(simMs / SEEDS).toFixed(0)} ms a seed; ${(steps / SEEDS).toFixed(0)} steps and ${(runes / SEEDS).toFixed(0)} runes a seed; ${failed} of ${SEEDS} found a failure`,
  );
  console.log(
    `  ${(perRune * 1000).toFixed(0)} µs a rune simulated; anchor, runes dispatched straight to the engine on SQLite: ${(anchorPerRune * 1000).toFixed(0)} µs a rune (${(perRune / anchorPerRune).toFixed(1)}x)`,
  );
  return true;
}
