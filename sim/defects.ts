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
    name: 'plan-hangs-on-retry',
    description: 'issue 28 (a): an autonomy plan stays "executing" after a critic\'s retry, its task pending and its agent idle',
    matches: (failure) => failure.oracle === 'liveness' && /\(autonomy-loop\) in "executing" after plan\.critique(?!, its conversation)/.test(failure.message),
  },
  {
    name: 'close-leaves-plans-open',
    description: 'found by the simulation: closing a conversation seals it with its autonomy plans still open (planning, executing), so they can never end',
    matches: (failure) => failure.oracle === 'liveness' && /\(autonomy-loop\) in "[a-z_]+" after [a-z_.]+, its conversation \S+ closed/.test(failure.message),
  },
  {
    name: 'chat-paused-while-working',
    description: 'issue 28 (c): a chat actor is paused as stale while its turn streams or its tool waits for a person',
    matches: (failure) => failure.oracle === 'stale work',
  },
  {
    name: 'react-escapes-budget',
    description: "issue 28 (d): a ReAct agent answers past its conversation's modelCalls budget, or starts a turn while it is suspended for budget",
    matches: (failure) =>
      (failure.oracle === 'budget' && !/\(0 of a ReAct loop\)/.test(failure.message)) ||
      (failure.oracle === 'invariants' && failure.message.startsWith('INV-AGENT-BUDGET') && /agent\/react-/.test(failure.message)),
  },
];

/** The known defect a failure is, if any. */
export const defectOf = (failure: Failure): KnownDefect | undefined => KNOWN_DEFECTS.find((defect) => defect.matches(failure));
