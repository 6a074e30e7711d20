import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderMachinesDoc } from '../scripts/machines-doc.js';
import { edgesOf, machines } from '../src/index.js';

describe('docs/machines.md', () => {
  const committed = readFileSync(new URL('../docs/machines.md', import.meta.url), 'utf8');

  it('is what `npm run docs` generates from the machines (run it after changing a table)', () => {
    expect(committed).toBe(renderMachinesDoc());
  });

  it('shows every machine with its diagram and every edge of its table', () => {
    for (const machine of Object.values(machines)) {
      expect(committed).toContain(machine.toMermaid());
      if ('table' in machine) for (const e of edgesOf(machine)) expect(committed).toContain(`| \`${e.from}\` | \`${e.on}\` |`);
    }
  });
});
