import type { StateOf } from './machine.js';
import { machines, type MachineId } from './machines.js';
import { reactAgentEffectsAt } from './react-agent/effects.js';
import type { AgentState } from './react-agent/state.js';
import type { StateNameOf } from './rune.js';

/**
 * How a state is at rest:
 * - `terminal`: one of its machine's `terminal` states: it accepts no event at all;
 * - `waiting`: on a person or an outside decision (`waitsFor` says which); nothing of the engine's is pending;
 * - `idle`: nothing pending at all, until someone asks for more.
 */
export type Rest = 'terminal' | 'waiting' | 'idle';

/** The machines of {@link machines} whose state has a name: every one but the data-state `react-agent`. */
export type FiniteMachineId = Exclude<MachineId, 'react-agent'>;

type Machines = typeof machines;

/**
 * A condition a state must meet to be at rest, where its name alone does not say (an autonomy
 * plan in `planning` waits for approval only once its plan is ready). `label` is its text for the
 * docs; `holds` is pure.
 */
export interface RestCondition<S> {
  readonly label: string;
  readonly holds: (state: S) => boolean;
}

/** How a non-terminal state is at rest, and on what condition if its name is not enough. */
type Decision<S> =
  | { readonly rest: 'idle'; readonly waitsFor?: undefined; readonly when?: RestCondition<S> }
  | { readonly rest: 'waiting'; readonly waitsFor: string; readonly when?: RestCondition<S> };

/** A resting state of machine `Id`: its id, the state's name, and how it rests. */
export type RestingStateOf<Id extends FiniteMachineId> = { readonly machine: Id; readonly state: StateNameOf<Machines[Id]> } & (
  | { readonly rest: 'terminal'; readonly waitsFor?: undefined; readonly when?: undefined }
  | Decision<StateOf<Machines[Id]>>
);

/** A resting state of a finite machine. */
export type FiniteRestingState = { [Id in FiniteMachineId]: RestingStateOf<Id> }[FiniteMachineId];

/** The rest of the data-state `react-agent`: its state has no name (`state: null`), only a condition. */
export interface DataRestingState {
  readonly machine: 'react-agent';
  readonly state: null;
  readonly rest: 'idle';
  readonly waitsFor?: undefined;
  readonly when: RestCondition<AgentState>;
}

/** What {@link atRest} returns for a state at rest. */
export type RestingState = FiniteRestingState | DataRestingState;

/** A decision per non-terminal state at rest; a state left out has work in progress or owed by the engine. */
type Decisions = { readonly [Id in FiniteMachineId]: Partial<Record<StateNameOf<Machines[Id]>, Decision<StateOf<Machines[Id]>>>> };

const idle = { rest: 'idle' } as const;
const waiting = (waitsFor: string) => ({ rest: 'waiting', waitsFor }) as const;

/**
 * Every machine's non-terminal states at rest, decided from its seed and from the engine's effects
 * (which states an epic still works in or owes a timer for). Left out, in progress: a turn
 * `streaming`, `tool_executing` or in an ending an older log left unfinalized; a tool call `pending_call`
 * (its policy decides) or `executing`; a plan asking its planner (`goal_received`, `planning` while
 * revised), `executing` or `reviewing`; a CLI session `creating` or `streaming`; a conversation
 * `closing`; an agent `spawning` or `running_turn`; an archival run, a metrics collector or a
 * registration anywhere but its steady state (ERROR retries after a backoff: the engine owes it).
 */
const decisions: Decisions = {
  'chat-actor': {
    idle,
    paused: waiting("the user's next interaction (ProcessInteraction) or a Cancel; the inactivity timeout completes it"),
  },
  'agent-manager-session': {
    idle,
    waiting_approval: waiting("a person's approve_action or reject_action of the CLI's tool, command, browser or MCP request"),
    waiting_input: waiting("a person's answer to the CLI's question (send_message)"),
    completed: idle,
    paused: waiting("a person's resume_session (the CLI offered to resume the task, its process was lost, or it exited with an approval pending)"),
    error: waiting("a person's retry, resume_session or cancel_session"),
    stopped: idle,
  },
  'circuit-breaker': { CLOSED: idle, OPEN: idle, HALF_OPEN: idle },
  'agent-registration': {
    ACTIVE: idle,
    PAUSED: waiting("an operator's resume; paused by the registry itself (rate_limited, providers_open), a breaker of its chain letting calls through"),
  },
  connection: { DISCONNECTED: idle, OPEN: idle, SUBSCRIBED: idle },
  'metrics-collector': { RUNNING: idle },
  archival: { IDLE: idle },
  'turn-engine': { idle },
  'tool-call': { awaiting_approval: waiting("a person's approval or denial (approved, denied); approval_timeout ends it") },
  conversation: {
    created: idle,
    // Its agents and turns are instances of their own, each checked on its own.
    active: idle,
    paused: waiting("a person's resume_requested or close_requested"),
    suspended: waiting("an operator's budget_replenished or reset (or close_requested)"),
    closed: idle,
  },
  'agent-lifecycle': { idle },
  'autonomy-loop': {
    planning: {
      ...waiting("a person's plan_approved or plan_rejected (with autoStart the engine starts it at once)"),
      // After needs_replan the planner is asked again: that is work, not a wait.
      when: { label: 'its plan is ready (not being revised)', holds: (plan) => plan.replanning !== true },
    },
    blocked: waiting("an operator's retry_task of a failed task; unresolvable stops it after blockedTimeoutMs"),
  },
};

const finiteMachineIds = (Object.keys(machines) as MachineId[]).filter((id): id is FiniteMachineId => id !== 'react-agent');

/**
 * The states where nothing is left working and the engine owes nothing, machine by machine in the
 * order of {@link machines}, each machine's in the order of its `states`: its `terminal` states,
 * and the states that wait on a person or rest idle.
 *
 * @example
 * ```ts
 * import { restingStates } from 'runestream';
 * console.log(restingStates.filter((r) => r.machine === 'tool-call' && r.rest === 'waiting'));
 * // Logs: [ { machine: 'tool-call', state: 'awaiting_approval', rest: 'waiting', waitsFor: ... } ]
 * ```
 */
export const restingStates: readonly FiniteRestingState[] = finiteMachineIds.flatMap((machine) => {
  const { states, terminal } = machines[machine];
  const decided = decisions[machine] as Readonly<Record<string, Decision<never>>>;
  return states.flatMap((state): FiniteRestingState[] => {
    // Both when a decision names a terminal state: the tests refuse a state listed twice.
    const entries: object[] = [];
    if (terminal.includes(state)) entries.push({ machine, state, rest: 'terminal' });
    if (Object.hasOwn(decided, state)) entries.push({ machine, state, ...decided[state] });
    return entries as FiniteRestingState[];
  });
});

/** A streamed answer whose completion nobody owes would be left streaming for good. */
const reactAgentNothingDue = (state: AgentState): boolean =>
  Object.keys(reactAgentEffectsAt(state)).length === 0 && !state.messages.some((m) => m.role === 'assistant' && m.streaming);

/**
 * The rest of a ReAct agent (seed 004): idle when `reactAgentEffectsAt` is empty (no model call
 * owed, no tool call of the loop without its result) and no answer is left streaming.
 */
export const reactAgentRest: DataRestingState = {
  machine: 'react-agent',
  state: null,
  rest: 'idle',
  when: { label: 'no model call owed, no tool call of its loop unanswered, no answer streaming', holds: reactAgentNothingDue },
};

const byState = new Map<string, FiniteRestingState>(restingStates.map((entry) => [`${entry.machine}\n${entry.state}`, entry]));

/** Whether a condition holds; a malformed state it cannot read is not at rest (total, like a transition). */
const holds = (condition: RestCondition<never> | undefined, state: unknown): boolean => {
  if (condition === undefined) return true;
  try {
    return (condition.holds as (s: unknown) => boolean)(state);
  } catch {
    return false;
  }
};

/**
 * The entry of {@link restingStates} (or {@link reactAgentRest}) that an instance's state is in,
 * or `undefined` while work is in progress or owed by the engine. Pure.
 *
 * 1. `react-agent`: its state has no name; at rest when {@link reactAgentRest}'s condition holds.
 * 2. Any other machine: the entry of its state's name (`state.value`) whose condition, if any, holds.
 * 3. A machine not in {@link machines} (one of your own), or a state without a name: `undefined`.
 *
 * @example
 * ```ts
 * import { atRest, toolCall } from 'runestream';
 * let call = toolCall.initial({ callId: 'c1', toolName: 'shell', arguments: {} });
 * console.log(atRest('tool-call', call)); // Logs: undefined
 * call = toolCall.transition(call, { type: 'requires_approval' });
 * console.log(atRest('tool-call', call)?.rest); // Logs: waiting
 * call = toolCall.transition(call, { type: 'denied' });
 * console.log(atRest('tool-call', call)?.rest); // Logs: terminal
 * ```
 */
export function atRest<Id extends MachineId>(machineId: Id, state: StateOf<Machines[Id]>): RestingState | undefined;
export function atRest(machineId: string, state: unknown): RestingState | undefined;
export function atRest(machineId: string, state: unknown): RestingState | undefined {
  if (machineId === reactAgentRest.machine) return holds(reactAgentRest.when, state) ? reactAgentRest : undefined;
  const value = typeof state === 'object' && state !== null ? (state as { value?: unknown }).value : undefined;
  if (typeof value !== 'string') return undefined;
  const entry = byState.get(`${machineId}\n${value}`);
  return entry !== undefined && holds(entry.when, state) ? entry : undefined;
}
