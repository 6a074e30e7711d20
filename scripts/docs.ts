import { writeFileSync } from 'node:fs';
import { renderMachinesDoc } from './machines-doc.js';

// `npm run docs`: regenerate docs/machines.md; test/docs.test.ts fails while it is stale.
const path = new URL('../docs/machines.md', import.meta.url);
writeFileSync(path, renderMachinesDoc());
console.log(`wrote ${path.pathname}`);
