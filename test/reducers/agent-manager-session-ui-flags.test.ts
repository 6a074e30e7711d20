import { describe, expect, it } from 'vitest';
import { agentManagerSession, agentManagerUiFlags, type AgentManagerUiFlags } from '../../src/index.js';
import { stateAt } from '../support/machine-properties.js';
import { readSeed } from '../support/seed-diagram.js';

type Flag = keyof AgentManagerUiFlags;

/** The seed's "Derived UI State" table: each flag and the states where it is true. */
function seedFlagTable(): Map<Flag, string[]> {
  const seed = readSeed('001_7f680d74c9e005a9.txt');
  const section = seed.slice(seed.indexOf('## Derived UI State'), seed.indexOf('## Implementation Notes'));
  const rows = [...section.matchAll(/^\|\s*`(\w+)`\s*\|(.*)\|$/gm)];
  return new Map(rows.map(([, flag, cell]) => [flag as Flag, [...cell!.matchAll(/`(\w+)`/g)].map((m) => m[1]!)]));
}

const table = seedFlagTable();
const cases = agentManagerSession.states.flatMap((value) => [...table.keys()].map((flag) => ({ value, flag })));

describe('agentManagerUiFlags: seed 001 "Derived UI State"', () => {
  it("the seed's table has the six flags", () => {
    expect([...table.keys()].sort()).toEqual(Object.keys(agentManagerUiFlags(agentManagerSession.initial())).sort());
    expect(table.size).toBe(6);
  });

  it.each(cases)('$flag in $value', ({ value, flag }) => {
    const listed = table.get(flag)!.includes(value);
    const manual = agentManagerUiFlags(stateAt(agentManagerSession, value as never, {}, { autoApprove: false }));
    const auto = agentManagerUiFlags(stateAt(agentManagerSession, value as never, {}, { autoApprove: true }));
    // "(when auto-approve enabled)": the warning alone depends on the mode.
    expect(manual[flag]).toBe(flag === 'showAutoModeWarning' ? false : listed);
    expect(auto[flag]).toBe(listed);
  });
});
