import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const tsx = join(root, 'node_modules', '.bin', 'tsx');
const packageJson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: unknown };

/** Every ```ts block of the README (a ```typescript block is a listing, not a program), with its heading. */
const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => {
  const before = readme.slice(0, m.index);
  const heading = [...before.matchAll(/^#+ (.*)$/gm)].at(-1)?.[1] ?? 'top';
  return { heading, code: m[1]! };
});

// The README's examples are programs: each runs as its own process against the source, and its
// `assert`s state what it shows. An example that stops being true fails here.
/** The source file behind a package export (`''` or `'/client'`), from package.json's `exports`. */
function sourceOf(subpath: string): string {
  const target = (packageJson.exports as Record<string, { import?: string }>)[`.${subpath}`]?.import;
  if (target === undefined) throw new Error(`package.json exports no "runestream${subpath}"`);
  return join(root, target.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts'));
}

describe('README examples', () => {
  it('has examples', () => {
    expect(blocks.length).toBeGreaterThan(0);
  });

  // Inside the checkout, so the examples resolve rxjs and zod from its node_modules.
  const cache = join(root, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(cache, 'readme-'));
  it.each(blocks.map((b, i) => [`${i + 1}: ${b.heading}`, b.code] as const))('example %s runs', (name, source) => {
    const file = join(dir, `example-${name.split(':')[0]}.mts`);
    const rewritten = source.replace(/from 'runestream(\/[\w-]+)?'/g, (_, sub: string | undefined) => `from '${sourceOf(sub ?? '')}'`);
    writeFileSync(file, rewritten);
    expect(() => execFileSync(tsx, [file], { cwd: root, stdio: 'pipe', timeout: 60_000 })).not.toThrow();
  });
});
