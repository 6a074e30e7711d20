import { z } from 'zod';

/**
 * What the ACP adapter reads of an agent's messages, and no more: the fields it maps are checked,
 * the rest passes unchecked (`loose`), so an agent's extra fields (kilo's `messageId`, `_meta`,
 * `locations`) never make a message invalid. The types of what we send come from
 * `@agentclientprotocol/sdk`.
 */

/** A JSON-RPC 2.0 id the adapter answers or matches (ACP's request ids; `null` is never a request's). */
export const AcpId = z.union([z.string().max(256), z.number().int()]);
export type AcpId = z.infer<typeof AcpId>;

/** Any JSON-RPC 2.0 message on the agent's stdout: a request, a notification or a response. */
export const AcpEnvelope = z.looseObject({
  jsonrpc: z.literal('2.0'),
  id: AcpId.optional(),
  method: z.string().min(1).max(256).optional(),
  params: z.unknown().optional(),
  result: z.unknown().optional(),
  error: z.looseObject({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }).optional(),
});
export type AcpEnvelope = z.infer<typeof AcpEnvelope>;

/** The fields of a tool call the adapter shows: `tool_call` has them all, `tool_call_update` only those that changed. */
const toolCallFields = {
  toolCallId: z.string().min(1),
  title: z.string().nullish(),
  kind: z.string().nullish(),
  status: z.string().nullish(),
  rawInput: z.unknown().optional(),
};

/** A tool call's fields, in a `tool_call`, a `tool_call_update` or a permission request. */
export const AcpToolCallFields = z.looseObject(toolCallFields);
export type AcpToolCallFields = z.infer<typeof AcpToolCallFields>;

/** `session/update` params: the update's kind, then the fields of the kinds the adapter maps. */
export const AcpSessionNotification = z.object({
  sessionId: z.string().min(1),
  update: z.looseObject({ sessionUpdate: z.string() }),
});

export const AcpMessageChunk = z.looseObject({
  sessionUpdate: z.literal('agent_message_chunk'),
  /** kilo numbers its messages; a new id starts a new message. */
  messageId: z.string().nullish(),
  content: z.looseObject({ type: z.string(), text: z.string().optional() }),
});

export const AcpToolCall = AcpToolCallFields.extend({ sessionUpdate: z.enum(['tool_call', 'tool_call_update']) });

/** `session/request_permission` params. */
export const AcpPermissionRequest = z.looseObject({
  sessionId: z.string().min(1),
  toolCall: AcpToolCallFields,
  options: z.array(z.looseObject({ optionId: z.string().min(1), kind: z.string() })).min(1),
});
export type AcpPermissionRequest = z.infer<typeof AcpPermissionRequest>;

/** The results the adapter reads: `initialize`'s capabilities, `session/new`'s id, a prompt's stop reason. */
export const AcpInitializeResult = z.looseObject({
  agentCapabilities: z.looseObject({ loadSession: z.boolean().optional() }).optional(),
});
export const AcpNewSessionResult = z.looseObject({ sessionId: z.string().min(1).max(1024) });
export const AcpPromptResult = z.looseObject({ stopReason: z.string() });
