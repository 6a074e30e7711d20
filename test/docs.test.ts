import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderMachinesDoc } from '../scripts/machines-doc.js';
import { renderReferenceDoc } from '../scripts/reference-doc.js';
import { withKnownDefectsTable } from '../scripts/known-defects-doc.js';
import { withRestingStatesTable } from '../scripts/resting-states-doc.js';
import { KNOWN_DEFECTS } from '../sim/defects.js';
import { edgesOf, machines, reactAgent, reactAgentRest, restingStates } from '../src/index.js';

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

describe('docs/reference.md', () => {
  const committed = readFileSync(new URL('../docs/reference.md', import.meta.url), 'utf8');
  /** The part of the reference about one machine. */
  const sectionOf = (id: string): string => committed.split(`<a id="${id}"></a>`)[1]!.split(/\n<a id="[a-z-]+"><\/a>\n\n## /)[0]!;

  it('is what `npm run docs` generates from the machines (run it after changing a schema or a table)', () => {
    expect(committed).toBe(renderReferenceDoc());
  });

  it("lists, in each machine's section, every event type with its JSON Schema and every rune kind of its table", () => {
    for (const [id, machine] of Object.entries(machines)) {
      const section = sectionOf(id);
      for (const type of machine.events) expect(section, `${id}: ${type}`).toMatch(new RegExp(`\`${type}\`:\n\n\`\`\`json\n\\{.*"const":"${type}"`));
      const kinds = 'table' in machine ? edgesOf(machine).map((e) => e.kind) : [];
      for (const kind of [machine.spawnKind, ...kinds]) expect(section, `${id}: ${kind}`).toContain(`| \`${kind}\` |`);
    }
  });

  it("writes each schema as JSON, a union member by member (tool.result's statuses)", () => {
    const blocks = [...committed.matchAll(/```json\n(.*)\n```/g)].map((m) => JSON.parse(m[1]!) as { type?: string });
    expect(blocks.length).toBeGreaterThan(100);
    expect(blocks.every((schema) => typeof schema === 'object')).toBe(true);
    expect(sectionOf('tool-call')).toContain('"status":{"type":"string","const":"error"}');
  });
});

describe("README.md's table of resting states", () => {
  const committed = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

  it('is what `npm run docs` generates from restingStates (run it after changing the list)', () => {
    expect(committed).toBe(withRestingStatesTable(committed));
  });

  it('has a row for each entry, with how it rests, and one for the ReAct agent', () => {
    for (const entry of restingStates) expect(committed).toMatch(new RegExp(`\\| \`${entry.machine}\` \\| \`${entry.state}\`[^|]* \\| ${entry.rest} \\|`));
    expect(committed).toContain(`| \`react-agent\` | *data state* when ${reactAgentRest.when.label} | idle |`);
  });

  it('regenerates a table edited by hand, and refuses a README that lost its markers', () => {
    expect(withRestingStatesTable(committed.replace('| `turn-engine` | `idle` | idle |', '| `turn-engine` | `streaming` | idle |'))).toBe(committed);
    expect(() => withRestingStatesTable(committed.replace('<!-- resting-states:end -->', ''))).toThrow(/resting-states:end/);
  });
});

describe("README.md's table of the simulation's known defects", () => {
  const committed = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

  it('is what `npm run docs` generates from sim/defects.ts and sim/seed-set.ts (run it after naming or fixing a defect)', () => {
    expect(committed).toBe(withKnownDefectsTable(committed));
    for (const defect of KNOWN_DEFECTS) expect(committed).toContain(`| \`${defect.name}\` |`);
  });
});
