import { z } from 'zod';

/** Seed 002 "Agent Lifecycle"; DECOMMISSIONED is terminal. */
export const AgentRegistrationStateName = z.enum(['REGISTERED', 'ACTIVATING', 'ACTIVE', 'PAUSED', 'ERROR', 'RETRYING', 'DECOMMISSIONED']);
export type AgentRegistrationStateName = z.infer<typeof AgentRegistrationStateName>;

/** The agent's state: its state name plus why it was paused or failed. */
export const AgentRegistrationState = z.object({
  value: AgentRegistrationStateName,
  /** Why the agent is paused ("admin pause or rate limiting"); cleared on resume. */
  reason: z.string().optional(),
  /** The error of the last failure that reported one; cleared once the agent is ACTIVE again. */
  error: z.string().optional(),
});
export type AgentRegistrationState = z.infer<typeof AgentRegistrationState>;

/** Seed 002 "Agent Lifecycle" edges as events; `retry_failed` is the seed's "repeated failure". */
export const AgentRegistrationEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('register') }),
  z.object({ type: z.literal('init_succeeded') }),
  z.object({ type: z.literal('init_failed'), error: z.string().optional() }),
  z.object({ type: z.literal('pause'), reason: z.string().optional() }),
  z.object({ type: z.literal('resume') }),
  z.object({ type: z.literal('remove') }),
  z.object({ type: z.literal('retry_init') }),
  z.object({ type: z.literal('retry_succeeded') }),
  z.object({ type: z.literal('retry_failed'), error: z.string().optional() }),
]);
export type AgentRegistrationEvent = z.infer<typeof AgentRegistrationEvent>;
