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

export const AgentLifecycleState = AgentLifecycleInput.extend({
  value: AgentLifecycleStateName,
  /** The turn assigned last (the running one while `running_turn`). */
  turnId: z.string().optional(),
  /** Why init failed, or the last turn's error. */
  error: z.string().optional(),
  /** The event that terminated the agent: the `reason` of its `agent.terminated` rune. */
  terminatedBy: z.enum(['kill', 'parent_closed', 'budget_exhausted']).optional(),
  /** Why its budget was exhausted (the dimension, used and limit), when that terminated it. */
  reason: z.string().optional(),
  /** What its turns used, summed: the stats of its `agent.terminated` rune. */
  usage: Usage,
});
export type AgentLifecycleState = z.infer<typeof AgentLifecycleState>;

/** The events of the seed's diagram; `kill.force` is its `kill(force)`. */
export const AgentLifecycleEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('init_complete') }),
  z.object({ type: z.literal('init_error'), error: z.string() }),
  z.object({ type: z.literal('turn_assigned'), turnId: z.string().min(1).optional() }),
  z.object({ type: z.literal('turn_completed'), usage: Usage.optional() }),
  z.object({ type: z.literal('turn_interrupted'), reason: z.string().optional(), usage: Usage.optional() }),
  z.object({ type: z.literal('turn_error'), error: z.string().optional(), usage: Usage.optional() }),
  z.object({ type: z.literal('kill'), force: z.boolean().optional() }),
  z.object({ type: z.literal('parent_closed') }),
  z.object({ type: z.literal('budget_exhausted'), reason: z.string().optional() }),
]);
export type AgentLifecycleEvent = z.infer<typeof AgentLifecycleEvent>;
