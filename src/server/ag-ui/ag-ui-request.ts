import { z } from 'zod';
import { isSegment } from '../../reducers/stream-ids.js';
import { describeIssues, parseBounded } from '../../reducers/validate.js';

/** A message of the request's conversation: only its role and text are read; other fields pass. */
const AgUiMessage = z.looseObject({
  id: z.string(),
  role: z.string(),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string(), text: z.string().optional() }))]).optional(),
});
export type AgUiMessage = z.infer<typeof AgUiMessage>;

/** An answer to an interrupt of the previous run (AG-UI 1.0 `ResumeEntry`). */
export const AgUiResumeEntry = z.looseObject({
  interruptId: z.string().min(1),
  status: z.enum(['resolved', 'cancelled']),
  payload: z.unknown().optional(),
});
export type AgUiResumeEntry = z.infer<typeof AgUiResumeEntry>;

/**
 * The body of `POST /agents/:agent/ag-ui`: AG-UI 1.0's `RunAgentInput`, the fields this server
 * reads (`tools`, `context`, `state`, `forwardedProps` are accepted and not used). `threadId`
 * names the conversation (`conv/<threadId>`), so it is a stream id segment: 1 to 128
 * characters, no `/`.
 */
export const AgUiRunInput = z.looseObject({
  threadId: z.string().refine(isSegment, 'a thread id is 1 to 128 characters with no "/", NUL or lone surrogate'),
  runId: z.string().min(1),
  messages: z.array(AgUiMessage),
  resume: z.array(AgUiResumeEntry).optional(),
});
export type AgUiRunInput = z.infer<typeof AgUiRunInput>;

/** The body read: the input, or why not (naming the failing fields, bounded as `describeIssues` is). */
export function parseRunInput(body: Buffer): { ok: true; input: AgUiRunInput } | { ok: false; code: 'invalid_json' | 'invalid_message'; message: string } {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    return { ok: false, code: 'invalid_json', message: 'the body is not JSON: send an AG-UI RunAgentInput ({threadId, runId, messages, resume?})' };
  }
  // Bounded, as a WebSocket frame's: a body of 100,000 wrong messages is described by its first.
  const parsed = parseBounded(AgUiRunInput, json);
  if (!parsed.success) return { ok: false, code: 'invalid_message', message: `the body is not an AG-UI RunAgentInput: ${describeIssues(parsed.issues, parsed.partial)}` };
  return { ok: true, input: parsed.data };
}

/** A message's text: its string content, or its text parts joined. */
const textOf = (message: AgUiMessage): string =>
  typeof message.content === 'string'
    ? message.content
    : (message.content ?? []).flatMap((part) => (part.type === 'text' && part.text !== undefined ? [part.text] : [])).join('');

/**
 * The new user input of a request: the text of the user messages after the conversation's last
 * message of any other role (an AG-UI client sends the whole conversation each run), joined by a
 * blank line; `undefined` when it ends with another role's message (a rejoin or a resume).
 */
export function newUserInput(messages: readonly AgUiMessage[]): string | undefined {
  let first = messages.length;
  while (first > 0 && messages[first - 1]!.role === 'user') first--;
  if (first === messages.length) return undefined;
  return messages.slice(first).map(textOf).join('\n\n');
}
