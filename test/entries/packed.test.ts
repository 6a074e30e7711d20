import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The package as a user installs it: built (as `npm run build` does, into a scratch copy so the
// checkout's dist is left alone), then loaded by its own name from an application's node_modules,
// with `import` and with `require`.
const root = fileURLToPath(new URL('../..', import.meta.url));
const packageJson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
const entryNames = Object.keys(packageJson.exports)
  .filter((subpath) => subpath !== './package.json')
  .map((subpath) => `runestream${subpath.slice(1)}`);

let scratch: string;
let pkg: string;
let app: string;

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'runestream-packed-'));
  pkg = join(scratch, 'runestream');
  app = join(scratch, 'app');
  mkdirSync(pkg);
  execFileSync(join(root, 'node_modules/.bin/tsc'), ['-p', join(root, 'tsconfig.build.json'), '--outDir', join(pkg, 'dist')], { cwd: root, stdio: 'pipe' });
  copyFileSync(join(root, 'package.json'), join(pkg, 'package.json'));
  copyFileSync(join(root, 'README.md'), join(pkg, 'README.md'));
  // The package's own dependencies, as npm would have installed them beside it.
  symlinkSync(join(root, 'node_modules'), join(pkg, 'node_modules'));
  mkdirSync(join(app, 'node_modules'), { recursive: true });
  symlinkSync(pkg, join(app, 'node_modules', 'runestream'));
}, 120_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Runs `code` with node in the application's folder; its stdout. */
const nodeIn = (code: string, type: 'commonjs' | 'module'): string =>
  execFileSync(process.execPath, [`--input-type=${type}`, '-e', code], { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

const namesBy = (load: 'require' | 'import'): Record<string, string[]> => {
  const code =
    load === 'require'
      ? `const out = {}; for (const name of ${JSON.stringify(entryNames)}) out[name] = Object.keys(require(name)).sort(); console.log(JSON.stringify(out));`
      : `const out = {}; for (const name of ${JSON.stringify(entryNames)}) out[name] = Object.keys(await import(name)).sort(); console.log(JSON.stringify(out));`;
  return JSON.parse(nodeIn(code, load === 'require' ? 'commonjs' : 'module')) as Record<string, string[]>;
};

describe('the built package', () => {
  it('packs dist and the README, and no test, source or bench file', () => {
    const [packed] = JSON.parse(
      execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: pkg, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }),
    ) as [{ files: { path: string }[] }];
    const paths = packed.files.map((file) => file.path);
    expect(paths).toEqual(expect.arrayContaining(['README.md', 'package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/cli/main.js', 'dist/server/client/index.js']));
    expect(paths.filter((path) => !path.startsWith('dist/') && path !== 'README.md' && path !== 'package.json')).toEqual([]);
    expect(paths.filter((path) => /\.test\.|^dist\/(test|bench|scripts)\//.test(path))).toEqual([]);
  });

  it('gives every entry to require() (Node 20.19+ and 22.12+ load ES modules synchronously) with the same names as to import', () => {
    const required = namesBy('require');
    expect(Object.keys(required)).toEqual(entryNames);
    expect(required['runestream']).toContain('createEngine');
    expect(required['runestream/client']).toContain('createClient');
    expect(required).toEqual(namesBy('import'));
  });
});
