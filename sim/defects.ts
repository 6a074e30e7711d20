import type { Failure } from './run-seed.js';

/**
 * The defects the simulation has found and the project has not fixed yet, each with how to tell
 * its failure from any other. A seed that finds one is expected to fail with it (CI keeps such
 * seeds in its set, so the fix flips them); any other failure is new.
 */
export interface KnownDefect {
  /** A short stable name. */
  readonly name: string;
  /** Where it is to be fixed, and what it is. */
  readonly description: string;
  readonly matches: (failure: Failure) => boolean;
}

export const KNOWN_DEFECTS: readonly KnownDefect[] = [
  {
    name: 'react-escapes-budget',
    description:
      "issue 28 (d), what is left of it: a ReAct loop's model call checks only whether its conversation is suspended, not its budget, so a call that starts in the instant another turn ends over the budget (before its suspension lands) is made; a loop's internal rounds are not checked between calls",
    matches: (failure) =>
      (failure.oracle === 'budget' && !/\(0 of a ReAct loop\)/.test(failure.message)) ||
      (failure.oracle === 'invariants' && failure.message.startsWith('INV-AGENT-BUDGET') && /agent\/react-/.test(failure.message)),
  },
];

/** The known defect a failure is, if any. */
export const defectOf = (failure: Failure): KnownDefect | undefined => KNOWN_DEFECTS.find((defect) => defect.matches(failure));
