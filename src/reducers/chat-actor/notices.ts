import { isRuneOf, SPAWN_EVENT_TYPE, type Rune } from '../rune.js';
import { chatActor } from './machine.js';
import type { ChatActorEvent } from './schema.js';

/** Seed 000 "SSE Events": what a chat actor tells its watchers, in the seed's own JSON shape. */
export type ChatActorNotice =
  | { type: 'state_changed'; data: { from_state: string; to_state: string; reason: string } }
  | { type: 'stopped'; data: { reason: string; partial_response: string } };

/** Why the actor moved, in words, for `state_changed.reason`. */
function changeReason(event: ChatActorEvent): string {
  switch (event.type) {
    case 'ProcessInteraction':
      return 'Processing user interaction';
    case 'InteractionComplete':
      return event.success ? 'Interaction complete' : `Interaction failed: ${event.error ?? 'unknown error'}`;
    case 'Pause':
      return event.reason ?? 'Paused';
    case 'Cancel':
      return event.reason;
    case 'InactivityTimeout':
      return 'Inactivity timeout';
    case 'Error':
      return event.error;
    case 'Ping':
    case 'Shutdown':
      return event.type;
  }
}

/** Why the actor stopped, as a code, for `stopped.reason` (the seed's example: `user_cancelled`). */
function stopReason(event: ChatActorEvent): string {
  switch (event.type) {
    case 'Cancel':
      return event.reason;
    case 'InactivityTimeout':
      return 'inactivity_timeout';
    default:
      return 'error';
  }
}

/**
 * The seed-000 notices of one chat-actor rune: `state_changed` when the state name changes, then
 * `stopped` when it reaches a terminal state. Runes of other machines, spawns and self-loops give
 * none. `partial_response` is empty here: a chat actor keeps no text (its agent's turn does, and
 * the server fills it in with `createServer({ partialResponse })`).
 *
 * @example
 * ```ts
 * import { chatActorNotices } from 'runestream';
 * const notices = chatActorNotices({ stream: 'c', seq: 3, machine: 'chat-actor', kind: 'Cancel', event: { type: 'Cancel', reason: 'user_cancelled' }, from: 'idle', to: 'cancelled', at: 0 });
 * console.dir(notices, { depth: null });
 * // Logs: [ { type: 'state_changed', data: { from_state: 'idle', to_state: 'cancelled', reason: 'user_cancelled' } },
 * //   { type: 'stopped', data: { reason: 'user_cancelled', partial_response: '' } } ]
 * ```
 */
export function chatActorNotices(rune: Rune): ChatActorNotice[] {
  if (!isRuneOf(chatActor, rune) || rune.event.type === SPAWN_EVENT_TYPE) return [];
  const { event, from, to } = rune;
  if (from === undefined || to === undefined || from === to) return [];
  const notices: ChatActorNotice[] = [{ type: 'state_changed', data: { from_state: from, to_state: to, reason: changeReason(event) } }];
  if (chatActor.terminal.includes(to)) notices.push({ type: 'stopped', data: { reason: stopReason(event), partial_response: '' } });
  return notices;
}
