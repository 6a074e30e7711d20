import { chatOfActor, chatOfWork } from '../../src/effects/chat-work.js';
import type { Rune } from '../../src/reducers/rune.js';
import type { LogView } from '../actions.js';
import type { Oracle } from './oracle.js';

const WORKING = new Set(['streaming', 'tool_executing']);
/** An agent CLI session's states that wait on a person: its process idles by design. */
const SESSION_WAITING = new Set(['waiting_approval', 'waiting_input', 'completed']);

/**
 * No clock stops work that is under way, nor takes waiting on a person for silence: a chat actor is
 * never paused as stale, nor timed out, while a turn of its chat (whichever agent answers) streams
 * or runs tools (a tool waiting for a person included); an agent CLI session waiting for the user
 * is not ended as idle. (The simulation's tools and model calls all end or say something within
 * their timeouts, far below `staleAfterMs`: a turn at work here is never silent for that long.)
 */
export const staleWorkOracle = (): Oracle => ({
  name: 'stale work',
  see(rune: Rune, view: LogView) {
    if (rune.machine === 'agent-manager-session') {
      const event = rune.event as { type: string; error?: string };
      if (event.type !== 'process_error' || event.error?.startsWith('idle_timeout') !== true || !SESSION_WAITING.has(rune.from ?? '')) return undefined;
      return {
        oracle: 'stale work',
        message: `${rune.stream} got process_error "${event.error}" (seq ${rune.seq}) while it was "${rune.from}", waiting on a person`,
        stream: rune.stream,
      };
    }
    if (rune.machine !== 'chat-actor') return undefined;
    const event = rune.event as { type: string; reason?: string };
    const byClock = (event.type === 'Pause' && event.reason?.startsWith('stale') === true) || event.type === 'InactivityTimeout';
    if (!byClock) return undefined;
    const chat = chatOfActor(rune.stream);
    if (chat === undefined) return undefined;
    const turn = view.streams('turn-engine', [...WORKING]).find((stream) => chatOfWork(stream) === chat);
    if (turn === undefined) return undefined;
    const state = view.value.get(turn)!;
    return {
      oracle: 'stale work',
      message: `${rune.stream} got ${event.type}${event.reason === undefined ? '' : ` "${event.reason}"`} (seq ${rune.seq}) while its turn ${turn} is ${state}`,
      stream: rune.stream,
    };
  },
});
