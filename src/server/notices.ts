import type { AnyMachine } from '../reducers/machine.js';
import type { Rune } from '../reducers/rune.js';
import { streamNotices } from '../streams/notices.js';

/** The SSE text of a rune's events, each with the rune's seq as its `id`; '' when it has none. */
export function sseEventsOf(rune: Rune, machines?: Readonly<Record<string, AnyMachine>>): string {
  let text = '';
  for (const notice of streamNotices(rune, machines)) text += `id: ${rune.seq}\nevent: ${notice.type}\ndata: ${JSON.stringify(notice.data)}\n\n`;
  return text;
}
