import { z } from 'zod';

/** Seed 003 "Tool Lifecycle State Machine"; the five outcome states are terminal. */
export const ToolCallStateName = z.enum([
  'pending_call',
  'awaiting_approval',
  'executing',
  'denied',
  'completed_result',
  'error_result',
  'timeout_result',
  'cancelled_result',
]);
export type ToolCallStateName = z.infer<typeof ToolCallStateName>;

/** The `tool.call` rune's payload: which tool, with what arguments (any JSON value, as the model sent it). */
export const ToolCallInput = z.object({
  callId: z.string().min(1),
  toolName: z.string().min(1),
  arguments: z.json(),
});
export type ToolCallInput = z.infer<typeof ToolCallInput>;

/**
 * One call's state. Progress chunks are only counted: they live in the `tool.progress` runes, so
 * the state of a long-running tool stays small.
 */
export const ToolCallState = ToolCallInput.extend({
  value: ToolCallStateName,
  /** Why the policy asked for approval. */
  policyReason: z.string().optional(),
  /** Who approved the call. */
  approver: z.string().optional(),
  /** Why it was denied or cancelled. */
  reason: z.string().optional(),
  output: z.json().optional(),
  error: z.string().optional(),
  /** `progress_update`s received while executing. */
  progressCount: z.number().int().nonnegative(),
});
export type ToolCallState = z.infer<typeof ToolCallState>;

/** The events of the seed's diagram, with the payloads of its "Tool Events" table. */
export const ToolCallEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('requires_approval'), policyReason: z.string().optional() }),
  z.object({ type: z.literal('auto_approved') }),
  z.object({ type: z.literal('no_approval_needed') }),
  z.object({ type: z.literal('approved'), approver: z.string().optional() }),
  z.object({ type: z.literal('denied'), reason: z.string().optional() }),
  z.object({ type: z.literal('approval_timeout') }),
  z.object({ type: z.literal('progress_update'), chunk: z.string() }),
  z.object({ type: z.literal('success'), output: z.json() }),
  z.object({ type: z.literal('execution_error'), error: z.string() }),
  z.object({ type: z.literal('execution_timeout') }),
  z.object({ type: z.literal('cancelled'), reason: z.string().optional() }),
]);
export type ToolCallEvent = z.infer<typeof ToolCallEvent>;

/** How a call ended: the `status` of its `tool.result`, or `denied`. */
export const ToolCallStatus = z.enum(['success', 'error', 'timeout', 'cancelled', 'denied']);
export type ToolCallStatus = z.infer<typeof ToolCallStatus>;
