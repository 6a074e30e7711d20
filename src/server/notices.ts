import { chatActorNotices, type ChatActorNotice } from '../reducers/chat-actor/notices.js';
import { machines } from '../reducers/machines.js';
import type { AnyMachine } from '../reducers/machine.js';
import type { Rune } from '../reducers/rune.js';

/** A seed-000 SSE event: `state_changed` or `stopped`, with the seed's JSON data. */
export type StreamNotice = ChatActorNotice;

const builtIn = machines as Readonly<Record<string, AnyMachine>>;

/**
 * The SSE events of one rune. A chat actor's are seed 000's own ({@link chatActorNotices}). Any
 * other finite machine gets the same two events in the same shape: `state_changed` when the
 * state name changes (`reason`: the rune's kind), then `stopped` when it enters one of its
 * machine's terminal states (`partial_response` empty). Spawns, self-loops and data-state
 * machines give none. `machines` says which states are terminal (an engine's `machines`; default:
 * the built-in ones); a machine it does not know gets no `stopped`.
 */
export function streamNotices(rune: Rune, machines: Readonly<Record<string, AnyMachine>> = builtIn): StreamNotice[] {
  if (rune.machine === 'chat-actor') return chatActorNotices(rune);
  const { from, to } = rune;
  if (from === undefined || to === undefined || from === to) return [];
  const notices: StreamNotice[] = [{ type: 'state_changed', data: { from_state: from, to_state: to, reason: rune.kind } }];
  if (Object.hasOwn(machines, rune.machine) && machines[rune.machine]!.terminal.includes(to)) {
    notices.push({ type: 'stopped', data: { reason: rune.kind, partial_response: '' } });
  }
  return notices;
}

/** The SSE text of a rune's events, each with the rune's seq as its `id`; '' when it has none. */
export function sseEventsOf(rune: Rune, machines?: Readonly<Record<string, AnyMachine>>): string {
  let text = '';
  for (const notice of streamNotices(rune, machines)) text += `id: ${rune.seq}\nevent: ${notice.type}\ndata: ${JSON.stringify(notice.data)}\n\n`;
  return text;
}
