import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderMachinesDoc } from '../scripts/machines-doc.js';
import { edgesOf, machines, reactAgent } from '../src/index.js';

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

  it("shows a data-state machine's table: each input with its rune kind and source", () => {
    for (const row of reactAgent.inputs) expect(committed).toContain(`| \`${row.on}\` | \`${row.kind}\` | ${row.source === 'seed' ? 'seed' : `*${row.source}*`}`);
  });
});
