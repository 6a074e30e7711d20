import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const probe = join(root, 'test/support/import-probe.mjs');
const RUNS = 9;

/** What the light root must not load, not even through another package. */
const HEAVY = /^(ai|@ai-sdk\/.*|@modelcontextprotocol\/sdk|better-sqlite3|ws)$/;

/** The package a module URL belongs to, or undefined for one of ours. */
const packageOf = (url: string): string | undefined => [...url.matchAll(/\/node_modules\/((?:@[^/]+\/)?[^/]+)\//g)].at(-1)?.[1];

interface ImportCost {
  /** Median time of the imports in a fresh node, hooks off. */
  ms: number;
  /** Modules loaded (ESM and CommonJS), counted in a separate run with the probe's resolve hook. */
  modules: number;
  /** Which of the heavy packages were among them. */
  heavy: string[];
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** One fresh `node` (no loader: the built JavaScript, as an application runs it) importing `files`. */
const probeRun = (files: readonly string[], count: boolean): { ms: number; modules: string[] } =>
  JSON.parse(execFileSync(process.execPath, [probe, ...(count ? ['--count'] : []), ...files], { cwd: root, encoding: 'utf8' })) as { ms: number; modules: string[] };

/**
 * Issue 11's import cost: a fresh node importing `{ chatActor, createEngine }` from the root
 * (`dist/index.js`; ESM loads the same modules whichever names are imported), against the flat
 * root before the entries were split, which loaded every entry's modules: the root, sqlite,
 * agents and server together. The package is built into node_modules/.cache first (tsc, as
 * `npm run build`). Timing runs alternate between the two, `RUNS` each, and take the median. The
 * bar: the root loads none of `ai`, `@ai-sdk/*`, `@modelcontextprotocol/sdk`, `better-sqlite3`, `ws`.
 */
export function benchImportCost(): boolean {
  const outDir = join(root, 'node_modules', '.cache', 'runestream-bench-import-cost');
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  try {
    execFileSync(join(root, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json', '--outDir', outDir, '--declaration', 'false', '--sourceMap', 'false'], {
      cwd: root,
      stdio: 'inherit',
    });
    const after = [join(outDir, 'index.js')];
    const before = ['index.js', 'sqlite.js', 'agents.js', 'server/index.js'].map((file) => join(outDir, file));

    const times = { after: [] as number[], before: [] as number[] };
    probeRun(before, false); // warm the file system cache for both
    for (let i = 0; i < RUNS; i++) {
      times.after.push(probeRun(after, false).ms);
      times.before.push(probeRun(before, false).ms);
    }
    const cost = (files: readonly string[], ms: number[]): ImportCost => {
      const modules = probeRun(files, true).modules;
      const heavy = [...new Set(modules.map(packageOf).filter((name): name is string => name !== undefined && HEAVY.test(name)))].sort();
      return { ms: median(ms), modules: modules.length, heavy };
    };
    const light = cost(after, times.after);
    const flat = cost(before, times.before);

    const ok = light.heavy.length === 0;
    const line = (name: string, c: ImportCost) =>
      `  ${name.padEnd(56)} ${`${c.ms.toFixed(1)} ms`.padStart(10)} ${`${c.modules} modules`.padStart(13)}   heavy: ${c.heavy.join(', ') || 'none'}`;
    console.log(`\nimport cost: a fresh node importing the built package (median of ${RUNS} runs each)`);
    console.log(line("{ chatActor, createEngine } from 'runestream'", light));
    console.log(line('before: the flat root (root + sqlite + agents + server)', flat));
    console.log(`  ratio ${(light.ms / flat.ms).toFixed(2)} of the time, ${(light.modules / flat.modules).toFixed(2)} of the modules`);
    console.log(`  the root loads none of ai, @ai-sdk/*, @modelcontextprotocol/sdk, better-sqlite3, ws  ${ok ? 'PASS' : 'FAIL'}`);
    return ok;
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}
