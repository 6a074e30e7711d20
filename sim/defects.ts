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

/** None today: each defect found so far is fixed (issue 28), and the seeds that found it pass in CI. */
export const KNOWN_DEFECTS: readonly KnownDefect[] = [];

/** The known defect a failure is, if any. */
export const defectOf = (failure: Failure): KnownDefect | undefined => KNOWN_DEFECTS.find((defect) => defect.matches(failure));
