import { z } from 'zod';
import { Budget, Usage } from '../budget.js';

/** Seed 003 "Session (Conversation) Lifecycle State Machine"; `archived` is terminal. */
export const ConversationStateName = z.enum(['created', 'active', 'paused', 'suspended', 'closing', 'closed', 'archived']);
export type ConversationStateName = z.infer<typeof ConversationStateName>;

/** JSON objects the seed leaves open (config, budget info, final stats): stored as given. */
const JsonObject = z.record(z.string(), z.json());

/** The `session.created` rune's payload. */
export const ConversationInput = z.object({
  conversationId: z.string().min(1).optional(),
  config: JsonObject.optional(),
});
export type ConversationInput = z.infer<typeof ConversationInput>;

export const ConversationState = ConversationInput.extend({
  value: ConversationStateName,
  rootAgentId: z.string().optional(),
  /**
   * `new_turn`s accepted. The agent epics send none (a conversation's turns are its agents', as
   * its closing stats count them: a rune fewer a turn), so only logs written before count here.
   */
  turns: z.number().int().nonnegative().optional(),
  /** Why the conversation was paused, suspended or closed; cleared when it becomes active again. */
  reason: z.string().optional(),
  budgetInfo: JsonObject.optional(),
  finalStats: JsonObject.optional(),
  /**
   * What the `turn_completed` runes that carried a turn's usage summed (logs written before its
   * usage became its agents', each agent's lifecycle summing its own turns): the same turns, so the
   * conversation's usage is its agents' summed (`conversationUsage$`), never this added to it.
   */
  usage: Usage,
  /** The limits the last `budget_replenished` set; until one does, the configured conversation budget applies. */
  budget: Budget.optional(),
  /**
   * Turns that ended in error in a row (`turn_completed` with `outcome: 'error'`): a completed turn
   * clears it, an interrupted one leaves it, and so does becoming active again after a suspension.
   * Absent: none (so states folded from older logs read the same).
   */
  consecutiveErrors: z.number().int().positive().optional(),
});
export type ConversationState = z.infer<typeof ConversationState>;

/**
 * How a turn ended, on the conversation's `turn_completed` (an extension of the seed's event):
 * absent means `completed`, so logs written before it read the same.
 */
export const TurnOutcome = z.enum(['completed', 'error', 'interrupted']);
export type TurnOutcome = z.infer<typeof TurnOutcome>;

/** The default {@link ErrorThreshold}: five turns in a row ending in error suspend the conversation. */
export const DEFAULT_ERROR_THRESHOLD = 5;

/**
 * How many turns of a conversation may end in error in a row before it is suspended
 * (`error_threshold`): an integer from 1 to 1,000. Default {@link DEFAULT_ERROR_THRESHOLD}.
 * The one schema of the option, `agentEpics({ errorThreshold })`'s and the server configuration's.
 */
export const ErrorThreshold = z.number().int().min(1).max(1000);

/** The events of the seed's diagram, with the payloads of its "Session Events" table. */
export const ConversationEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('first_message') }),
  z.object({ type: z.literal('agent_ready'), rootAgentId: z.string().min(1).optional() }),
  z.object({ type: z.literal('new_turn') }),
  z.object({ type: z.literal('turn_completed'), usage: Usage.optional(), outcome: TurnOutcome.optional() }),
  z.object({ type: z.literal('pause_requested'), reason: z.string().optional() }),
  z.object({ type: z.literal('resume_requested') }),
  z.object({ type: z.literal('budget_exhausted'), reason: z.string().optional(), budgetInfo: JsonObject.optional() }),
  z.object({ type: z.literal('error_threshold'), reason: z.string().optional() }),
  /** `budget`: the conversation's limits from now on (usage keeps counting); without it the limits stay. */
  z.object({ type: z.literal('budget_replenished'), budget: Budget.optional() }),
  z.object({ type: z.literal('reset') }),
  z.object({ type: z.literal('close_requested'), reason: z.string().optional() }),
  z.object({ type: z.literal('cleanup_complete'), finalStats: JsonObject.optional() }),
  z.object({ type: z.literal('archive_requested') }),
]);
export type ConversationEvent = z.infer<typeof ConversationEvent>;

/**
 * The payload of each rune kind of seed 003's "Session Events" table, camelCase. Kinds the seed
 * gives no payload (`session.resumed`, `session.unsuspended`) carry an empty one; `new_turn`,
 * `turn_completed` and `archive_requested` (no seed kind) carry none.
 */
export const ConversationPayloads = {
  'session.created': ConversationInput,
  'session.activated': z.object({ rootAgentId: z.string().optional() }),
  'session.paused': z.object({ reason: z.string().optional() }),
  'session.resumed': z.object({}),
  /** `reason` is the event's, else the event type (`budget_exhausted`, `error_threshold`). */
  'session.suspended': z.object({ reason: z.string(), budgetInfo: JsonObject.optional() }),
  'session.unsuspended': z.object({}),
  'session.closing': z.object({ reason: z.string().optional() }),
  'session.closed': z.object({ finalStats: JsonObject.optional() }),
} as const;
