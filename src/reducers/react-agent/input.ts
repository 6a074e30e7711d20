import { z } from 'zod';
import { Usage } from '../budget.js';
import { eventTypesOf } from '../event-types.js';
import { Claim } from '../tool-call/schema.js';
import { ToolCallRequest, ToolCallResult } from './state.js';

// Every input carries `timestamp` (Unix ms); one not after the state's `updatedAt` takes effect at `updatedAt + 1` (see applyAgentInput).
const timestamp = z.number();
const id = z.string().min(1);

const UserMessageReceived = z.object({
  type: z.literal('user-message-received'),
  messageId: id,
  content: z.string(),
  timestamp,
});
const LlmMessageStarted = z.object({ type: z.literal('llm-message-started'), messageId: id, timestamp });
const LlmMessageCompleted = z.object({
  type: z.literal('llm-message-completed'),
  messageId: id,
  content: z.string(),
  timestamp,
});

/** What a finished LLM call observed: tool calls to issue (keyed by tool call id), or the loop's end. */
export const ReActObservation = z.discriminatedUnion('type', [
  z.object({ type: z.literal('continue-re-act'), toolCalls: z.record(id, ToolCallRequest) }),
  /**
   * `reason` is ours, not the seed's: the loop ended without asking the model, and why (its
   * conversation suspended, paused or closing, or its agent ended), so the message stays unanswered.
   */
  z.object({ type: z.literal('complete-re-act'), reason: z.string().optional() }),
]);
export type ReActObservation = z.infer<typeof ReActObservation>;

const ReActObserved = z.object({
  type: z.literal('re-act-observed'),
  /** What the LLM call answered up to: the `answersTo` of its `call-llm` effect. */
  calledLlmAt: z.number(),
  observation: ReActObservation,
  /**
   * Ours, not the seed's: what the model call that observed this used (its answered rounds
   * summed, each a response as a turn-based agent's), which the agent's lifecycle and conversation
   * count against their budgets. Absent when no model was called, and in logs written before it.
   */
  usage: Usage.optional(),
  timestamp,
});
/**
 * Ours, not the seed's: a round of a model call that answered and asked again (internal tools,
 * answered inside the call), or an empty answer a provider chain fell over from, with what it
 * used. Recorded as it is answered, so a restart before the call's `re-act-observed` loses none of
 * it: the call's turn sums these and its observation's `usage` (which then holds only the rounds
 * after the last of these).
 */
const LlmRoundAnswered = z.object({
  type: z.literal('llm-round-answered'),
  /** The call it is a round of: the `answersTo` of its `call-llm` effect, as its `re-act-observed`'s `calledLlmAt`. */
  calledLlmAt: z.number(),
  usage: Usage,
  /**
   * The call answered with nothing (no text, no tool call) and a provider chain fell over from it
   * to the next provider: billed, so recorded at once, though no round of the call follows it.
   */
  emptyAnswer: z.literal(true).optional(),
  timestamp,
});
const ToolCallCompleted = z.object({
  type: z.literal('tool-call-completed'),
  toolCallId: id,
  result: ToolCallResult,
  timestamp,
});
const ContextWindowExpanded = z.object({ type: z.literal('context-window-expanded'), timestamp });
const HistoryToolCallsAdded = z.object({
  type: z.literal('history-tool-calls-added'),
  toolCallIds: z.array(id),
  timestamp,
});

/**
 * Ours, not the seed's: the runner of an external tool call claims it durably before the tool
 * starts (as the tool-call machine's `execution_claimed`), so a process taking the agent over knows
 * whether the tool started, and two runners cannot both start it. A re-run after a takeover names
 * the claim it `supersedes`.
 */
const ToolCallClaimed = z.object({
  type: z.literal('tool-call-claimed'),
  toolCallId: id,
  claim: Claim,
  supersedes: Claim.optional(),
  timestamp,
});

/**
 * Seed 004 "AgentInput": the seven inputs, in the seed's order, with the payloads of its examples;
 * then ours, `tool-call-claimed` and `llm-round-answered`.
 */
export const AgentInput = z.discriminatedUnion('type', [
  UserMessageReceived,
  LlmMessageStarted,
  LlmMessageCompleted,
  ReActObserved,
  ToolCallCompleted,
  ContextWindowExpanded,
  HistoryToolCallsAdded,
  ToolCallClaimed,
  LlmRoundAnswered,
]);
export type AgentInput = z.infer<typeof AgentInput>;

/**
 * The seed's "API Reference" names of its inputs, one per input of the union (the seed names
 * them apart from its list of inputs; each is the input of the same place in that list).
 */
/** `user-message-received`. */
export type UserMessageInput = Extract<AgentInput, { type: 'user-message-received' }>;
/** `llm-message-started`: the model begins streaming a user-visible message. */
export type LlmChunkInput = Extract<AgentInput, { type: 'llm-message-started' }>;
/** `llm-message-completed`. */
export type LlmMessageCompleteInput = Extract<AgentInput, { type: 'llm-message-completed' }>;
/** `re-act-observed`: the model call's observation, which issues the tool calls it asked for. */
export type ToolCallStartedInput = Extract<AgentInput, { type: 're-act-observed' }>;
/** `tool-call-completed`. */
export type ToolCallResultInput = Extract<AgentInput, { type: 'tool-call-completed' }>;
/** `context-window-expanded`. */
export type ExpandContextWindowInput = Extract<AgentInput, { type: 'context-window-expanded' }>;
/** `history-tool-calls-added`. */
export type AddToolCallsToContextInput = Extract<AgentInput, { type: 'history-tool-calls-added' }>;

/** The seed's "Schema Exports" name for the input schema. */
export const agentEventSchema = AgentInput;

/** Every input type, in the seed's order, then ours. */
export const AGENT_INPUT_TYPES = eventTypesOf(AgentInput);
