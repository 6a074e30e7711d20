/**
 * Builds the live inspector's page into dist/inspector (index.html, inspector.js, inspector.css),
 * which `createServer({ inspector })` serves at `/`. Run by `npm run build` and by `prepare`
 * (so `npm ci` in a checkout builds it); never committed.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const page = fileURLToPath(new URL('../src/server/inspector/page/', import.meta.url));
const out = fileURLToPath(new URL('../dist/inspector/', import.meta.url));

mkdirSync(out, { recursive: true });
await build({
  entryPoints: [`${page}main.ts`],
  outfile: `${out}inspector.js`,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  minify: true,
  sourcemap: true,
  legalComments: 'linked',
  logLevel: 'warning',
});
for (const file of ['index.html', 'inspector.css']) copyFileSync(`${page}${file}`, `${out}${file}`);
console.log(`runestream: inspector built into ${out}`);
