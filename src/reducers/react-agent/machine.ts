import { z } from 'zod';
import { DEFAULT_SPAWN_KIND, type Machine, type RunePayload, type Step } from '../machine.js';
import { mermaidFromTable } from '../mermaid.js';
import { otherAgentKindOf } from '../stream-ids.js';
import type { RowSource } from '../table.js';
import { initialAgentState } from './initial.js';
import { AGENT_INPUT_TYPES, AgentInput } from './input.js';
import { AgentState } from './state.js';
import { agentTransition, applyAgentInput } from './transition.js';

/** One input of the agent as a row of its table: the rune kind it appends, and where it comes from. */
export interface AgentInputRow {
  readonly on: AgentInput['type'];
  /** The rune kind of an accepted input. */
  readonly kind: string;
  /** `'seed'`: one of seed 004's inputs; `'extension'`: ours, see `note`. */
  readonly source: RowSource;
  /** Why the row exists, for extension rows. */
  readonly note?: string;
}

/**
 * Seed 004's seven inputs, each appending a rune of its own type, then ours. The seed has no
 * finite states: every input may apply at any time, and the rules of `agentTransition` decide.
 */
const inputs: readonly AgentInputRow[] = [
  ...AGENT_INPUT_TYPES.filter((on) => on !== 'tool-call-claimed' && on !== 'llm-round-answered').map((on): AgentInputRow => ({ on, kind: on, source: 'seed' })),
  {
    on: 'tool-call-claimed',
    // The tool-call machine's kind and payload, so whoever reads claims (the inspector, metrics) finds every claim by one kind.
    kind: 'tool.claimed',
    source: 'extension',
    note: 'the runner claims an external tool call in flight (unclaimed, or superseding its current claim) before its tool starts, so a process taking the agent over knows whether it started, and two runners cannot both start it',
  },
  {
    on: 'llm-round-answered',
    kind: 'llm-round-answered',
    source: 'extension',
    note: "a round of the model call in progress answered and asked again (internal tools), with its usage: recorded as it is answered, so a restart before the call's observation loses none of what the model answered",
  },
];

const kindOf = new Map(inputs.map((row) => [row.on, row.kind]));

/** The payload of an accepted input's rune: a claim's is the tool-call machine's `tool.claimed` payload; the others carry none. */
function payloadOf(event: AgentInput, next: AgentState): RunePayload | undefined {
  if (event.type !== 'tool-call-claimed') return undefined;
  const { toolCallId, claim, supersedes } = event;
  return { callId: toolCallId, claim, attempt: next.toolCalls[toolCallId]?.attempt ?? 1, supersedes };
}

/**
 * The ReAct agent of seed 004 as a runestream machine: `agentTransition` behind the Machine contract.
 *
 * Its state is data, not a finite state (`states` and `terminal` are empty): every input can apply
 * at any time, and the rules of `agentTransition` decide. A rejected input returns the same object,
 * with code `not_allowed` and the rule that refused it; the rune kind of an accepted input is its
 * type, but for our `tool-call-claimed`, a `tool.claimed` rune as the tool-call machine's (see
 * `inputs`). Uses the default window sizes of `agentTransition`.
 *
 * @example
 * ```ts
 * import { reactAgent } from 'runestream';
 * const s = reactAgent.initial();
 * const step = reactAgent.step(s, { type: 'llm-message-completed', messageId: 'a1', content: 'Hi', timestamp: 1 });
 * console.log(step.state === s, step);
 * // Logs: true { accepted: false, state: ..., code: 'not_allowed', reason: 'no message "a1" to complete' }
 * ```
 */
export const reactAgent: Machine<AgentState, AgentInput> & { readonly inputs: readonly AgentInputRow[] } = {
  id: 'react-agent',
  version: 1,
  initial: () => initialAgentState(),
  transition: (state, event) => agentTransition(event)(state),
  step: (state, event): Step<AgentState> => {
    try {
      const outcome = applyAgentInput(event, state);
      if (!outcome.applied) return { accepted: false, state, code: outcome.code, reason: outcome.reason };
      const payload = payloadOf(event, outcome.state);
      return { accepted: true, state: outcome.state, kind: kindOf.get(event.type) ?? event.type, ...(payload === undefined ? {} : { payload }) };
    } catch (error) {
      return { accepted: false, state, code: 'invalid_event', reason: `invalid event: ${String(error)}` };
    }
  },
  schemas: { state: AgentState, event: AgentInput, input: z.void() },
  states: [],
  terminal: [],
  events: AGENT_INPUT_TYPES,
  inputs,
  spawnKind: DEFAULT_SPAWN_KIND,
  // An agent has one kind: no ReAct loop where the same agent has a turn stream.
  otherKindOf: otherAgentKindOf,
  // One state, "agent", with a self-loop per input.
  toMermaid: () => mermaidFromTable({ states: ['agent'], terminal: [], table: inputs.map(({ on }) => ({ from: 'agent', on })) }),
};
