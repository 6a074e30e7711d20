import { z } from 'zod';
import { DEFAULT_SPAWN_KIND, type Machine, type Step } from '../machine.js';
import { mermaidFromTable } from '../mermaid.js';
import { initialAgentState } from './initial.js';
import { AGENT_INPUT_TYPES, AgentInput } from './input.js';
import { AgentState } from './state.js';
import { agentTransition, applyAgentInput } from './transition.js';

/**
 * The ReAct agent of seed 004 as a runestream machine: `agentTransition` behind the Machine contract.
 *
 * Its state is data, not a finite state (`states` and `terminal` are empty): every input can apply
 * at any time, and the rules of `agentTransition` decide. A rejected input returns the same object,
 * with code `not_allowed` and the rule that refused it; the rune kind of an accepted input is its
 * type. Uses the default window sizes of `agentTransition`.
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
export const reactAgent: Machine<AgentState, AgentInput> = {
  id: 'react-agent',
  initial: () => initialAgentState(),
  transition: (state, event) => agentTransition(event)(state),
  step: (state, event): Step<AgentState> => {
    try {
      const outcome = applyAgentInput(event, state);
      return outcome.applied ? { accepted: true, state: outcome.state, kind: event.type } : { accepted: false, state, code: outcome.code, reason: outcome.reason };
    } catch (error) {
      return { accepted: false, state, code: 'invalid_event', reason: `invalid event: ${String(error)}` };
    }
  },
  schemas: { state: AgentState, event: AgentInput, input: z.void() },
  states: [],
  terminal: [],
  events: AGENT_INPUT_TYPES,
  spawnKind: DEFAULT_SPAWN_KIND,
  // One state, "agent", with a self-loop per input.
  toMermaid: () => mermaidFromTable({ states: ['agent'], terminal: [], table: AGENT_INPUT_TYPES.map((on) => ({ from: 'agent', on })) }),
};
