import { NO_USAGE, addUsage } from '../budget.js';
import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { AgentLifecycleEvent, AgentLifecycleInput, AgentLifecycleState, AgentLifecycleStateName } from './schema.js';

type S = AgentLifecycleState;
type E = AgentLifecycleEvent;

/** A turn's end adds the turn's usage (an extension of the seed's payload) to the agent's. */
const USAGE_NOTE = "the event may carry the turn's `usage` (an extension of the seed's payload), added to the agent's for its stats and budget";
const used = (s: S, e: { usage?: S['usage'] }): Partial<S> => (e.usage === undefined ? {} : { usage: addUsage(s.usage, e.usage) });

/** Seed 003 Agent Lifecycle diagram, edge for edge, with the rune kinds of its "Agent Events" table. */
const table: readonly Row<S, E>[] = [
  { from: 'spawning', on: 'init_complete', to: 'idle', kind: 'agent.ready' },
  { from: 'spawning', on: 'init_error', to: 'failed', kind: 'agent.failed', assign: (_, e) => ({ error: e.error }) },
  { from: 'idle', on: 'turn_assigned', to: 'running_turn', kind: 'turn.started', assign: (_, e) => ({ turnId: e.turnId }) },
  { from: 'idle', on: 'kill', to: 'terminated', kind: 'agent.terminated', assign: () => ({ terminatedBy: 'kill' }) },
  { from: 'idle', on: 'parent_closed', to: 'terminated', kind: 'agent.terminated', assign: () => ({ terminatedBy: 'parent_closed' }) },
  { from: 'running_turn', on: 'turn_completed', to: 'idle', kind: 'turn.completed', assign: used, note: USAGE_NOTE },
  { from: 'running_turn', on: 'turn_interrupted', to: 'idle', kind: 'turn.interrupted', assign: used, note: USAGE_NOTE },
  { from: 'running_turn', on: 'turn_error', to: 'idle', kind: 'turn.error', assign: (s, e) => ({ error: e.error, ...used(s, e) }), note: USAGE_NOTE },
  {
    from: 'running_turn',
    on: 'kill',
    to: 'terminated',
    when: (_, e) => e.force === true,
    label: 'force',
    kind: 'agent.terminated',
    assign: () => ({ terminatedBy: 'kill' }),
  },
  {
    from: 'idle',
    on: 'budget_exhausted',
    to: 'terminated',
    kind: 'agent.terminated',
    assign: (_, e) => ({ terminatedBy: 'budget_exhausted', reason: e.reason }),
    note: "the event may say which limit was reached (`reason`, an extension of the seed's payload)",
  },
  // The rune table's "* -> terminated" where the diagram draws no edge and the agent would otherwise be stuck.
  {
    from: 'spawning',
    on: 'kill',
    to: 'terminated',
    kind: 'agent.terminated',
    assign: () => ({ terminatedBy: 'kill' }),
    source: 'extension',
    note: 'an agent whose init hangs must be killable',
  },
  {
    from: ['spawning', 'running_turn'],
    on: 'parent_closed',
    to: 'terminated',
    kind: 'agent.terminated',
    assign: () => ({ terminatedBy: 'parent_closed' }),
    source: 'extension',
    note: 'the parent conversation is gone, so nothing can ever resume or reap the agent',
  },
];

/**
 * One agent's lifecycle in seed 003: `spawning` -> `idle` <-> `running_turn`, ending `terminated`
 * or (init failed) `failed`. A running turn is only killed by `kill` with `force: true`.
 *
 * @example
 * ```ts
 * import { agentLifecycle } from 'runestream';
 * let s = agentLifecycle.initial({ agentId: 'a1', role: 'coder' });          // spawning
 * s = agentLifecycle.transition(s, { type: 'init_complete' });                // idle
 * s = agentLifecycle.transition(s, { type: 'turn_assigned', turnId: 't1' });  // running_turn
 * console.log(agentLifecycle.step(s, { type: 'kill' }));
 * // Logs: { accepted: false, state: ..., code: 'not_allowed', reason: 'event "kill" is not allowed in state "running_turn": it needs force' }
 * ```
 */
export const agentLifecycle = defineMachine<S, E, AgentLifecycleInput>({
  id: 'agent-lifecycle',
  states: AgentLifecycleStateName.options,
  terminal: ['terminated', 'failed'],
  events: eventTypesOf(AgentLifecycleEvent),
  schemas: { state: AgentLifecycleState, event: AgentLifecycleEvent, input: AgentLifecycleInput },
  initial: ({ agentId, role, model, parentId }) => ({ value: 'spawning', agentId, role, model, parentId, usage: NO_USAGE }),
  table,
  spawnKind: 'agent.spawning',
});
