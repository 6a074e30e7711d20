import { z } from 'zod';
import { describeIssues } from '../validate.js';
import { agentManagerSession } from './machine.js';
import type { AgentManagerSessionEvent } from './schema.js';

/**
 * A message of the agent CLI's output, as far as the session reads it: `{ts, type, ask?, say?,
 * partial?, text?}`. Other fields (images, ...) are not read, so they are not checked; a `ts` that
 * is not an epoch-ms integer is dropped rather than failing the message.
 */
export const AgentManagerCliMessage = z.object({
  type: z.enum(['ask', 'say']),
  /** The ask's name when `type` is `"ask"`, e.g. `"followup"`. */
  ask: z.string().optional(),
  /** The say's name when `type` is `"say"`, e.g. `"text"`. */
  say: z.string().optional(),
  /** True while the message's content is still streaming. */
  partial: z.boolean().optional(),
  text: z.string().optional(),
});
export type AgentManagerCliMessage = z.infer<typeof AgentManagerCliMessage>;

/** What a CLI message means for the session: an event to dispatch, or why there is none. */
export type AgentManagerCliMapping = { event: AgentManagerSessionEvent } | { ignored: string };

// The machine's own event list says which asks and says it has events for.
const cliEventTypes = new Set(agentManagerSession.events.filter((t) => t.startsWith('ask:') || t.startsWith('say:')));
/** The CLI sends it as a say, but the machine's event has no `say:` prefix. */
const API_REQ_STARTED = 'api_req_started';

/**
 * Maps one message of the real agent CLI to an `agentManagerSession` event. Never throws.
 *
 * 1. Anything that is not an {@link AgentManagerCliMessage}, or lacks its ask / say name, is
 *    ignored with a reason naming what is wrong.
 * 2. An ask or say with an event of the same name (`ask:followup`, `say:text`, ...) maps to it,
 *    carrying `partial` and `text` when present; the say `api_req_started` maps to `api_req_started`.
 * 3. Every other ask or say is ignored: the session has no event for it.
 *
 * @example
 * ```ts
 * import { fromCliMessage } from 'runestream';
 * console.log(fromCliMessage({ ts: 1, type: 'ask', ask: 'followup', text: 'Which branch?', partial: false }));
 * // Logs: { event: { type: 'ask:followup', partial: false, text: 'Which branch?', ts: 1 } }
 * console.log(fromCliMessage({ ts: 2, type: 'say', say: 'reasoning', text: '...' }));
 * // Logs: { ignored: 'say:reasoning has no agentManagerSession event' }
 * ```
 */
export function fromCliMessage(message: unknown): AgentManagerCliMapping {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) {
    const got = message === null ? 'null' : Array.isArray(message) ? 'an array' : typeof message;
    return { ignored: `not a CLI message: expected an object, got ${got}` };
  }
  const parsed = AgentManagerCliMessage.safeParse(message);
  if (!parsed.success) return { ignored: `invalid CLI message: ${describeIssues(parsed.error.issues)}` };
  const { type, partial, text } = parsed.data;
  const { ts } = message as { ts?: unknown };
  const name = parsed.data[type];
  if (name === undefined) return { ignored: `invalid CLI message: ${type}: required when type is "${type}"` };

  const eventType = type === 'say' && name === API_REQ_STARTED ? API_REQ_STARTED : `${type}:${name}`;
  if (eventType !== API_REQ_STARTED && !cliEventTypes.has(eventType)) {
    return { ignored: `${type}:${name} has no agentManagerSession event` };
  }
  const event = {
    type: eventType,
    ...(partial === undefined ? {} : { partial }),
    ...(text === undefined ? {} : { text }),
    ...(Number.isSafeInteger(ts) && (ts as number) >= 0 ? { ts } : {}),
  } as AgentManagerSessionEvent;
  return { event };
}
