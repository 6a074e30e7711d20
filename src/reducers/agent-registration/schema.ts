import { z } from 'zod';
import { AgentDefinition } from './definition.js';

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
  /** The definition it was spawned (or last redefined) with; absent for a registration spawned without one. */
  definition: AgentDefinition.optional(),
  /** Retries of its initialisation since it last entered ACTIVATING (each `retry_init` counts one); absent before the first. */
  attempts: z.number().int().nonnegative().optional(),
});
export type AgentRegistrationState = z.infer<typeof AgentRegistrationState>;

/** The spawn input: the agent's definition, or nothing (a registration tracked without checks). */
export const AgentRegistrationInput = AgentDefinition.optional();
export type AgentRegistrationInput = z.infer<typeof AgentRegistrationInput>;

/** The longest error or pause reason an event carries. */
const Reason = z.string().max(2000);

/** Seed 002 "Agent Lifecycle" edges as events; `retry_failed` is the seed's "repeated failure". */
export const AgentRegistrationEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('register') }),
  z.object({ type: z.literal('init_succeeded') }),
  z.object({ type: z.literal('init_failed'), error: Reason.optional() }),
  z.object({ type: z.literal('pause'), reason: Reason.optional() }),
  z.object({ type: z.literal('resume') }),
  z.object({ type: z.literal('remove') }),
  z.object({ type: z.literal('retry_init') }),
  z.object({ type: z.literal('retry_succeeded') }),
  z.object({ type: z.literal('retry_failed'), error: Reason.optional() }),
  /** Ours: a changed definition (its configuration file's role edited), checked again from ACTIVATING. */
  z.object({ type: z.literal('redefine'), definition: AgentDefinition }),
]);
export type AgentRegistrationEvent = z.infer<typeof AgentRegistrationEvent>;
