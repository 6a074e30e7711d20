import { writeFileSync } from 'node:fs';
import { renderMachinesDoc } from './machines-doc.js';
import { renderReferenceDoc } from './reference-doc.js';

// `npm run docs`: regenerate docs/machines.md and docs/reference.md; test/docs.test.ts fails while either is stale.
for (const [file, render] of [
  ['machines.md', renderMachinesDoc],
  ['reference.md', renderReferenceDoc],
] as const) {
  const path = new URL(`../docs/${file}`, import.meta.url);
  writeFileSync(path, render());
  console.log(`wrote ${path.pathname}`);
}
