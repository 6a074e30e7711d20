import type { Rune } from '../reducers/rune.js';
import type { StreamNotice } from '../streams/notices.js';

/** The SSE text of a rune's notices, each with the rune's seq as its `id`; '' when it has none. */
export function sseEventsOf(rune: Rune, notices: readonly StreamNotice[]): string {
  let text = '';
  for (const notice of notices) text += `id: ${rune.seq}\nevent: ${notice.type}\ndata: ${JSON.stringify(notice.data)}\n\n`;
  return text;
}
