import { z } from 'zod';
import { Usage } from '../budget.js';

/** Seed 003 "Agent Lifecycle State Machine"; `terminated` and `failed` are terminal. */
export const AgentLifecycleStateName = z.enum(['spawning', 'idle', 'running_turn', 'terminated', 'failed']);
export type AgentLifecycleStateName = z.infer<typeof AgentLifecycleStateName>;

/** The `agent.spawning` rune's payload. */
export const AgentLifecycleInput = z.object({
  agentId: z.string().min(1).optional(),
  role: z.string().optional(),
  model: z.string().optional(),
  parentId: z.string().min(1).optional(),
});
export type AgentLifecycleInput = z.infer<typeof AgentLifecycleInput>;

/**
 * What an agent did, carried by its `agent.terminated` rune (seed 003's `stats`): what whoever
 * terminated it counted (turns, tool calls), and what its turns used, from its lifecycle's totals.
 */
export const AgentStats = z.object({
  /** Turns it ran. */
  turns: z.number().int().nonnegative().optional(),
  /** Tool calls it made. */
  toolCalls: z.number().int().nonnegative().optional(),
  /** Tokens, model calls, tool calls, wall clock and cost of its turns, summed. */
  usage: Usage.optional(),
});
export type AgentStats = z.infer<typeof AgentStats>;

export const AgentLifecycleState = AgentLifecycleInput.extend({
  value: AgentLifecycleStateName,
  /** The turn assigned last (the running one while `running_turn`). */
  turnId: z.string().optional(),
  /** Why init failed, or the last turn's error. */
  error: z.string().optional(),
  /** The event that terminated the agent: the `reason` of its `agent.terminated` rune. */
  terminatedBy: z.enum(['kill', 'parent_closed', 'budget_exhausted']).optional(),
  /** What it did, as its terminating event reported. */
  stats: AgentStats.optional(),
  /** Why its budget was exhausted (the dimension, used and limit), when that terminated it. */
  reason: z.string().optional(),
  /** What its turns used, summed: the stats of its `agent.terminated` rune. */
  usage: Usage,
});
export type AgentLifecycleState = z.infer<typeof AgentLifecycleState>;

/**
 * The events of the seed's diagram; `kill.force` is its `kill(force)`. The events that terminate
 * the agent may carry its `stats`.
 */
export const AgentLifecycleEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('init_complete') }),
  z.object({ type: z.literal('init_error'), error: z.string() }),
  z.object({ type: z.literal('turn_assigned'), turnId: z.string().min(1).optional() }),
  z.object({ type: z.literal('turn_completed'), usage: Usage.optional() }),
  z.object({ type: z.literal('turn_interrupted'), reason: z.string().optional(), usage: Usage.optional() }),
  z.object({ type: z.literal('turn_error'), error: z.string().optional(), usage: Usage.optional() }),
  z.object({ type: z.literal('kill'), force: z.boolean().optional(), stats: AgentStats.optional() }),
  z.object({ type: z.literal('parent_closed'), stats: AgentStats.optional() }),
  z.object({ type: z.literal('budget_exhausted'), reason: z.string().optional(), stats: AgentStats.optional() }),
]);
export type AgentLifecycleEvent = z.infer<typeof AgentLifecycleEvent>;

const AgentId = z.string().optional();

/**
 * The payload of each rune kind of seed 003's "Agent Events" table, camelCase, each naming the
 * agent (its spawn input's `agentId`). The `turn.*` kinds an agent appends say which turn; the
 * turn's own stream (`TurnEnginePayloads`) carries its input and output.
 */
export const AgentLifecyclePayloads = {
  'agent.spawning': AgentLifecycleInput,
  'agent.ready': z.object({ agentId: AgentId }),
  'agent.failed': z.object({ agentId: AgentId, error: z.string() }),
  /** `reason` is the event that terminated the agent. */
  'agent.terminated': z.object({ agentId: AgentId, reason: z.enum(['kill', 'parent_closed', 'budget_exhausted']), stats: AgentStats.optional() }),
  'turn.started': z.object({ agentId: AgentId, turnId: z.string().optional() }),
  'turn.completed': z.object({ agentId: AgentId, turnId: z.string().optional() }),
  'turn.interrupted': z.object({ agentId: AgentId, turnId: z.string().optional(), reason: z.string().optional() }),
  'turn.error': z.object({ agentId: AgentId, turnId: z.string().optional(), message: z.string().optional() }),
} as const;
