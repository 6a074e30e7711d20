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
  /** Who runs the call: the claim its runner recorded before starting the tool (absent: it never started). */
  claim: z.string().optional(),
  /** How many claims the call has had: 1 for its first run, one more per re-run after a takeover. */
  attempt: z.number().int().positive().optional(),
});
export type ToolCallState = z.infer<typeof ToolCallState>;

/** The longest claim id, in UTF-16 code units. */
const MAX_CLAIM_LENGTH = 128;

/**
 * A claim on a call's execution: an id of the run that claims it, unique across processes (a random
 * UUID by default). The ReAct agent's claims on its own tool calls take the same ids.
 */
export const Claim = z.string().min(1).max(MAX_CLAIM_LENGTH);

/**
 * The events of the seed's diagram, with the payloads of its "Tool Events" table, and
 * `execution_claimed` (ours): the runner's claim, made before the tool starts; a re-run after a
 * takeover names the claim it `supersedes`.
 */
export const ToolCallEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('requires_approval'), policyReason: z.string().optional() }),
  z.object({ type: z.literal('auto_approved') }),
  z.object({ type: z.literal('no_approval_needed') }),
  z.object({ type: z.literal('approved'), approver: z.string().optional() }),
  z.object({ type: z.literal('denied'), reason: z.string().optional() }),
  z.object({ type: z.literal('approval_timeout') }),
  z.object({ type: z.literal('execution_claimed'), claim: Claim, supersedes: Claim.optional() }),
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

const CallId = z.string().min(1);

/**
 * The payload of each rune kind of seed 003's "Tool Events" table, camelCase. `tool.result` is told
 * apart by `status`: `success` carries the output, `error` the error, `cancelled` the reason if any.
 * A call that needs no approval (`no_approval_needed`) appends a rune of that kind, with none.
 */
export const ToolCallPayloads = {
  'tool.call': ToolCallInput,
  'tool.approval_requested': z.object({ callId: CallId, policyReason: z.string().optional() }),
  /** `approver` is absent when the policy approved the call (`auto_approved`). */
  'tool.approved': z.object({ callId: CallId, approver: z.string().optional() }),
  'tool.denied': z.object({ callId: CallId, reason: z.string().optional() }),
  /** `attempt` counts the call's claims; `supersedes` is the claim a re-run replaced. */
  'tool.claimed': z.object({ callId: CallId, claim: Claim, attempt: z.number().int().positive(), supersedes: Claim.optional() }),
  'tool.progress': z.object({ callId: CallId, chunk: z.string() }),
  'tool.result': z.discriminatedUnion('status', [
    z.object({ callId: CallId, status: z.literal('success'), output: z.json() }),
    z.object({ callId: CallId, status: z.literal('error'), error: z.string() }),
    z.object({ callId: CallId, status: z.literal('timeout') }),
    z.object({ callId: CallId, status: z.literal('cancelled'), reason: z.string().optional() }),
  ]),
} as const;
