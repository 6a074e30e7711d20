import { z } from 'zod';

/**
 * One chat message. The seed reuses `AgentMessage` from a protocol package we do not ship, so it is
 * defined here with the origin's fields: an assistant message is appended empty and `streaming`
 * by `llm-message-started`, and gets its content (and `streaming: false`) from `llm-message-completed`.
 * `timestamp` is the time of the input that created it; it orders `messages`.
 */
export const AgentMessage = z.discriminatedUnion('role', [
  z.object({ id: z.string().min(1), role: z.literal('user'), content: z.string(), timestamp: z.number() }),
  z.object({
    id: z.string().min(1),
    role: z.literal('assistant'),
    content: z.string(),
    timestamp: z.number(),
    streaming: z.boolean(),
  }),
]);
export type AgentMessage = z.infer<typeof AgentMessage>;

/** An external tool as configured: its description and its parameters' JSON Schema, serialized. */
export const ToolDefinition = z.object({ description: z.string(), schema: z.string() });
export type ToolDefinition = z.infer<typeof ToolDefinition>;

/** The outcome of an external tool call; `receivedAt` is the timestamp of the input that brought it. */
export const ToolCallResult = z.discriminatedUnion('isSuccess', [
  z.object({ isSuccess: z.literal(true), content: z.string(), receivedAt: z.number() }),
  z.object({ isSuccess: z.literal(false), error: z.string(), receivedAt: z.number() }),
]);
export type ToolCallResult = z.infer<typeof ToolCallResult>;

/** What the LLM asks for when it issues an external tool call (`parameters` serialized). */
export const ToolCallRequest = z.object({ name: z.string(), parameters: z.string(), calledAt: z.number() });
export type ToolCallRequest = z.infer<typeof ToolCallRequest>;

/**
 * One external tool call in the history; `result` is `null` while the call is in flight. `claim`
 * and `attempt` are ours (`tool-call-claimed`): the run that claimed the call before its tool
 * started (absent: it never started), and how many claims it has had.
 */
export const ToolCallRecord = ToolCallRequest.extend({
  result: ToolCallResult.nullable(),
  claim: z.string().optional(),
  attempt: z.number().int().positive().optional(),
});
export type ToolCallRecord = z.infer<typeof ToolCallRecord>;

/**
 * The ReAct loop in progress: how many recent messages it covers and which tool calls it involves.
 * `startedAt` / `updatedAt` are the origin's bookkeeping (the timestamps of the inputs that opened and
 * last changed it).
 */
export const ReActContext = z.object({
  contextWindowSize: z.number().int().positive(),
  toolCallIds: z.array(z.string()),
  startedAt: z.number(),
  updatedAt: z.number(),
});
export type ReActContext = z.infer<typeof ReActContext>;

/**
 * The agent's whole state (seed 004 "AgentState"). `updatedAt` is the timestamp of the last input
 * applied (time never goes back); `calledLlmAt` is what the last ReAct observation answered up to;
 * `reActContext` is `null` when there is nothing to respond to.
 */
export const AgentState = z.object({
  updatedAt: z.number(),
  messages: z.array(AgentMessage),
  tools: z.record(z.string(), ToolDefinition),
  toolCalls: z.record(z.string(), ToolCallRecord),
  calledLlmAt: z.number(),
  reActContext: ReActContext.nullable(),
});
export type AgentState = z.infer<typeof AgentState>;

// The seed's "Schema Exports" names, for code written against the seed's API.
export const agentStateSchema = AgentState;
export const toolDefinitionSchema = ToolDefinition;
export const toolCallRecordSchema = ToolCallRecord;
export const reActContextSchema = ReActContext;
