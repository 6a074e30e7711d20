import type { Rune } from '../../src/reducers/rune.js';
import type { LogView } from '../actions.js';
import type { Oracle } from './oracle.js';

const WORKING = new Set(['streaming', 'tool_executing']);

/**
 * No clock stops work that is under way: a chat actor is never paused as stale, nor timed out,
 * while its agent's turn streams or runs tools (a tool waiting for a person included).
 */
export const staleWorkOracle = (): Oracle => ({
  name: 'stale work',
  see(rune: Rune, view: LogView) {
    if (rune.machine !== 'chat-actor') return undefined;
    const event = rune.event as { type: string; reason?: string };
    const byClock = (event.type === 'Pause' && event.reason?.startsWith('stale') === true) || event.type === 'InactivityTimeout';
    if (!byClock) return undefined;
    const chat = rune.stream.split('/actor/')[0]!;
    const turn = `${chat}/agent/assistant/turn`;
    const state = view.value.get(turn);
    if (state === undefined || !WORKING.has(state)) return undefined;
    return {
      oracle: 'stale work',
      message: `${rune.stream} got ${event.type}${event.reason === undefined ? '' : ` "${event.reason}"`} (seq ${rune.seq}) while its turn ${turn} is ${state}`,
      stream: rune.stream,
    };
  },
});
