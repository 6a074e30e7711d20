import { NO_USAGE, addUsage } from '../budget.js';
import { eventTypesOf } from '../event-types.js';
import { agentLayoutReason } from '../stream-ids.js';
import { defineMachine, type Row } from '../table.js';
import { AgentLifecycleEvent, AgentLifecycleInput, AgentLifecyclePayloads, AgentLifecycleState, AgentLifecycleStateName } from './schema.js';

type S = AgentLifecycleState;
type E = AgentLifecycleEvent;
type P = typeof AgentLifecyclePayloads;

/** The `agent.terminated` payload: which event terminated the agent, with the stats it reported and what its turns used. */
const terminated = (_: S, e: Extract<E, { type: 'kill' | 'parent_closed' | 'budget_exhausted' }>, after: S) => ({
  agentId: after.agentId,
  reason: e.type,
  stats: { ...e.stats, usage: after.usage },
});
/** The payload of a `turn.*` kind that ends a turn: the agent and the turn. */
const turnEnded = (s: S) => ({ agentId: s.agentId, turnId: s.turnId });

/** A turn's end adds the turn's usage (an extension of the seed's payload) to the agent's. */
const USAGE_NOTE = "the event may carry the turn's `usage` (an extension of the seed's payload), added to the agent's for its stats and budget";
const used = (s: S, e: { usage?: S['usage'] }): Partial<S> => (e.usage === undefined ? {} : { usage: addUsage(s.usage, e.usage) });

/** Seed 003 Agent Lifecycle diagram, edge for edge, with the rune kinds of its "Agent Events" table. */
const table: readonly Row<S, E, P>[] = [
  { from: 'spawning', on: 'init_complete', to: 'idle', kind: 'agent.ready', payload: (s) => ({ agentId: s.agentId }) },
  {
    from: 'spawning',
    on: 'init_error',
    to: 'failed',
    kind: 'agent.failed',
    assign: (_, e) => ({ error: e.error }),
    payload: (s, e) => ({ agentId: s.agentId, error: e.error }),
  },
  {
    from: 'idle',
    on: 'turn_assigned',
    to: 'running_turn',
    kind: 'turn.started',
    assign: (_, e) => ({ turnId: e.turnId }),
    payload: (s, e) => ({ agentId: s.agentId, turnId: e.turnId }),
  },
  { from: 'idle', on: 'kill', to: 'terminated', kind: 'agent.terminated', assign: (_, e) => ({ terminatedBy: 'kill', stats: e.stats }), payload: terminated },
  {
    from: 'idle',
    on: 'parent_closed',
    to: 'terminated',
    kind: 'agent.terminated',
    assign: (_, e) => ({ terminatedBy: 'parent_closed', stats: e.stats }),
    payload: terminated,
  },
  { from: 'running_turn', on: 'turn_completed', to: 'idle', kind: 'turn.completed', assign: used, payload: turnEnded, note: USAGE_NOTE },
  {
    from: 'running_turn',
    on: 'turn_interrupted',
    to: 'idle',
    kind: 'turn.interrupted',
    assign: used,
    payload: (s, e) => ({ ...turnEnded(s), reason: e.reason }),
    note: USAGE_NOTE,
  },
  {
    from: 'running_turn',
    on: 'turn_error',
    to: 'idle',
    kind: 'turn.error',
    assign: (s, e) => ({ error: e.error, ...used(s, e) }),
    payload: (s, e) => ({ ...turnEnded(s), message: e.error }),
    note: USAGE_NOTE,
  },
  {
    from: 'running_turn',
    on: 'kill',
    to: 'terminated',
    when: (_, e) => e.force === true,
    label: 'force',
    kind: 'agent.terminated',
    assign: (_, e) => ({ terminatedBy: 'kill', stats: e.stats }),
    payload: terminated,
  },
  {
    from: 'idle',
    on: 'budget_exhausted',
    to: 'terminated',
    kind: 'agent.terminated',
    assign: (_, e) => ({ terminatedBy: 'budget_exhausted', reason: e.reason, stats: e.stats }),
    payload: terminated,
    note: "the event may say which limit was reached (`reason`, an extension of the seed's payload)",
  },
  // The rune table's "* -> terminated" where the diagram draws no edge and the agent would otherwise be stuck.
  {
    from: 'spawning',
    on: 'kill',
    to: 'terminated',
    kind: 'agent.terminated',
    assign: (_, e) => ({ terminatedBy: 'kill', stats: e.stats }),
    payload: terminated,
    source: 'extension',
    note: 'an agent whose init hangs must be killable',
  },
  {
    from: ['spawning', 'running_turn'],
    on: 'parent_closed',
    to: 'terminated',
    kind: 'agent.terminated',
    assign: (_, e) => ({ terminatedBy: 'parent_closed', stats: e.stats }),
    payload: terminated,
    source: 'extension',
    note: 'the parent conversation is gone, so nothing can ever resume or reap the agent',
  },
];

/**
 * One agent's lifecycle in seed 003: `spawning` -> `idle` <-> `running_turn`, ending `terminated`
 * or (init failed) `failed`. A running turn is only killed by `kill` with `force: true`. Each rune
 * kind's payload is in `AgentLifecyclePayloads`.
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
export const agentLifecycle = defineMachine<S, E, AgentLifecycleInput, P>({
  id: 'agent-lifecycle',
  states: AgentLifecycleStateName.options,
  terminal: ['terminated', 'failed'],
  events: eventTypesOf(AgentLifecycleEvent),
  schemas: { state: AgentLifecycleState, event: AgentLifecycleEvent, input: AgentLifecycleInput },
  initial: ({ agentId, role, model, parentId }) => ({ value: 'spawning', agentId, role, model, parentId, usage: NO_USAGE }),
  table,
  spawnKind: 'agent.spawning',
  payloads: AgentLifecyclePayloads,
  spawnPayload: ({ agentId, role, model, parentId }) => ({ agentId, role, model, parentId }),
  // Readied by its agent's turn (or ReAct) stream `<stream>/turn`, which exists only in the layout.
  layoutReason: (stream) => agentLayoutReason('agent-lifecycle', stream, 'agent'),
});
