import { z } from 'zod';

/** Seed 000 "States"; `error`, `cancelled` and `completed` are terminal. */
export const ChatActorStateName = z.enum(['idle', 'running', 'paused', 'error', 'cancelled', 'completed']);
export type ChatActorStateName = z.infer<typeof ChatActorStateName>;

/** The actor's state: its state name plus what the last events said. */
export const ChatActorState = z.object({
  value: ChatActorStateName,
  /** The user whose interaction is (or was last) being processed. */
  userId: z.uuid().optional(),
  /** Why the actor was paused or cancelled, or the error it ended with. */
  reason: z.string().optional(),
  error: z.string().optional(),
});
export type ChatActorState = z.infer<typeof ChatActorState>;

/** Seed 000 "Events", payloads in camelCase, plus the `Error` event of the "Any -> Error" rule. */
/**
 * `message` is an extension (the seed's payload is `user_id` alone): the user's message, which the
 * chat's agent answers (`chatTalk`). Without it the actor runs an interaction nothing answers.
 */
export const MAX_CHAT_MESSAGE_LENGTH = 100_000;
export const ProcessInteraction = z.object({
  type: z.literal('ProcessInteraction'),
  userId: z.uuid(),
  message: z.string().min(1).max(MAX_CHAT_MESSAGE_LENGTH).optional(),
});
export const Pause = z.object({ type: z.literal('Pause'), reason: z.string().optional() });
export const Cancel = z.object({ type: z.literal('Cancel'), reason: z.string() });
export const Ping = z.object({ type: z.literal('Ping') });
export const Shutdown = z.object({ type: z.literal('Shutdown') });
export const InteractionComplete = z.object({
  type: z.literal('InteractionComplete'),
  success: z.boolean(),
  error: z.string().optional(),
});
export const InactivityTimeout = z.object({ type: z.literal('InactivityTimeout') });
export const ChatActorError = z.object({ type: z.literal('Error'), error: z.string() });

export const ChatActorEvent = z.discriminatedUnion('type', [ProcessInteraction, Pause, Cancel, Ping, Shutdown, InteractionComplete, InactivityTimeout, ChatActorError]);
export type ChatActorEvent = z.infer<typeof ChatActorEvent>;
