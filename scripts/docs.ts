import { readFileSync, writeFileSync } from 'node:fs';
import { renderMachinesDoc } from './machines-doc.js';
import { renderReferenceDoc } from './reference-doc.js';
import { withKnownDefectsTable } from './known-defects-doc.js';
import { withRestingStatesTable } from './resting-states-doc.js';

// `npm run docs`: regenerate docs/machines.md, docs/reference.md and the README's tables (resting
// states, the simulation's known defects); test/docs.test.ts fails while any is stale.
for (const [file, render] of [
  ['docs/machines.md', renderMachinesDoc],
  ['docs/reference.md', renderReferenceDoc],
  ['README.md', () => withKnownDefectsTable(withRestingStatesTable(readFileSync(new URL('../README.md', import.meta.url), 'utf8')))],
] as const) {
  const path = new URL(`../${file}`, import.meta.url);
  writeFileSync(path, render());
  console.log(`wrote ${path.pathname}`);
}
