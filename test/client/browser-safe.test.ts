import { readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const entry = join(root, 'src/server/client/index.ts');
/** What the client may reach: the packages every platform has, the machines and the wire protocol. */
const allowedPackages = new Set(['rxjs', 'zod']);
const allowedFiles = (file: string) => {
  const path = relative(root, file);
  return path.startsWith('src/server/client/') || path.startsWith('src/reducers/') || path === 'src/server/protocol.ts';
};

/** Every module the file imports, statically or dynamically (`import type` included: harmless, but it should not reach Node types either). */
const importsOf = (file: string): string[] =>
  [...readFileSync(file, 'utf8').matchAll(/^\s*(?:import|export)\s[^;]*?from\s+'([^']+)'|^\s*import\s+'([^']+)'|import\(\s*'([^']+)'\s*\)/gm)].map(
    (m) => (m[1] ?? m[2] ?? m[3])!,
  );

describe('runestream/client runs in browsers', () => {
  it('imports, through every file it reaches, only rxjs, zod, src/reducers and src/server/protocol.ts', () => {
    const seen = new Set<string>();
    const outside: string[] = [];
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      if (!allowedFiles(file)) outside.push(relative(root, file));
      for (const specifier of importsOf(file)) {
        if (specifier.startsWith('.')) visit(join(dirname(file), specifier.replace(/\.js$/, '.ts')));
        else if (!allowedPackages.has(specifier)) outside.push(`${relative(root, file)} imports ${specifier}`);
      }
    };
    visit(entry);
    expect(outside).toEqual([]);
    expect(seen.size).toBeGreaterThan(10); // it did walk the graph (the machines included)
  });
});
