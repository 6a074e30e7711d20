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
export const ProcessInteraction = z.object({ type: z.literal('ProcessInteraction'), userId: z.uuid() });
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
