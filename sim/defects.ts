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
    description: "issue 28 (d): a ReAct agent answers past its conversation's modelCalls budget, or starts a turn while it is suspended for budget",
    matches: (failure) =>
      (failure.oracle === 'budget' && !/\(0 of a ReAct loop\)/.test(failure.message)) ||
      (failure.oracle === 'invariants' && failure.message.startsWith('INV-AGENT-BUDGET') && /agent\/react-/.test(failure.message)),
  },
  {
    name: 'agent-runs-two-turns',
    description: 'issue 28 (e): one agent runs two turns at once, one on its `turn` stream and one on its `react` stream (an agent id has two kinds)',
    matches: (failure) => failure.oracle === 'turn per agent',
  },
  {
    name: 'turn-started-while-suspended',
    description:
      "found by the simulation: a turn-based agent starts a turn (its lifecycle's turn.started) while its conversation is suspended for budget: a plan's task, a delegated sub-agent or a user's message (INV-AGENT-BUDGET)",
    matches: (failure) => failure.oracle === 'invariants' && failure.message.startsWith('INV-AGENT-BUDGET') && !/agent\/react-/.test(failure.message),
  },
  {
    name: 'turn-left-streaming-at-suspension',
    description:
      'found by the simulation: a turn whose tool round ends as its conversation is suspended for budget neither calls the model nor is interrupted: it stays "streaming", its agent "running_turn", for ever',
    matches: (failure) =>
      failure.oracle === 'liveness' &&
      /\/agent\/\S+ \((agent-lifecycle\) in "running_turn"|turn-engine\) in "(streaming|tool_executing)")(?!.*, its conversation)/.test(failure.message),
  },
  {
    name: 'close-leaves-work-open',
    description:
      'found by the simulation: closing a conversation seals it with work still open in it (a plan planning, executing or reviewing, an agent spawning, a ReAct loop calling its model), which can then never end',
    matches: (failure) => failure.oracle === 'liveness' && /, its conversation \S+ closed/.test(failure.message),
  },
  {
    name: 'budget-overrun-by-running-turns',
    description:
      "found by the simulation: a conversation's turns that are running when its modelCalls budget is used up go on calling the model (a turn waiting on its tools, or on a sub-agent, calls again once they finish), so its agents together overrun the budget by more than the calls they had under way",
    matches: (failure) => failure.oracle === 'budget' && /\(0 of a ReAct loop\)/.test(failure.message),
  },
  {
    name: 'react-message-left-streaming',
    description:
      'found by the simulation: a ReAct loop never comes to rest when a newer input supersedes its model call: the message that call started stays "streaming" in its state for ever',
    matches: (failure) => failure.oracle === 'liveness' && /\(react-agent\) in a working state after (?!.*, its conversation)/.test(failure.message.split('; ')[0]!),
  },
];

/** The known defect a failure is, if any. */
export const defectOf = (failure: Failure): KnownDefect | undefined => KNOWN_DEFECTS.find((defect) => defect.matches(failure));
