import { checkInvariants } from '../../src/reducers/invariants.js';
import type { Rune } from '../../src/reducers/rune.js';
import { BusyAgents } from './busy-agents.js';
import type { Oracle } from './oracle.js';

/** The seeds' invariants (`checkInvariants`) over the whole log, every call's outcome not yet required. */
export const invariantsOracle = (): Oracle => ({
  name: 'invariants',
  check(world) {
    return checkInvariants(world.log, { complete: false }).map((violation) => ({
      oracle: 'invariants',
      message: `${violation.invariant}: ${violation.message}`,
      stream: violation.rune.stream,
    }));
  },
});

/**
 * INV-TURN-SEQUENTIAL as seed 003 states it: at most one turn active per agent, whichever of its
 * streams (its turns, its ReAct loop) runs it; see {@link BusyAgents}.
 */
export const turnPerAgentOracle = (): Oracle => {
  const agents = new BusyAgents();
  return {
    name: 'turn per agent',
    see(rune: Rune) {
      const open = agents.see(rune);
      return open === undefined
        ? undefined
        : {
            oracle: 'turn per agent',
            message: `INV-TURN-SEQUENTIAL: ${rune.stream} starts a turn (seq ${rune.seq}) while the same agent's ${open} has one open`,
            stream: rune.stream,
          };
    },
  };
};
