import { z } from 'zod';
import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { ChatActorEvent, ChatActorState, ChatActorStateName } from './schema.js';

type S = ChatActorState;
type E = ChatActorEvent;

/** Seed 000 "Transition Rules", row for row; the table wins over the seed's drawing (DESIGN.md). */
const table: readonly Row<S, E>[] = [
  {
    from: 'idle',
    on: 'ProcessInteraction',
    to: 'running',
    assign: (_, e) => ({ userId: e.userId }),
    note: "the event may also carry the user's `message` (an extension of the seed's payload), which the chat's agent answers (chatTalk)",
  },
  { from: 'idle', on: 'Pause', to: 'paused', assign: (_, e) => ({ reason: e.reason }) },
  { from: 'idle', on: 'Cancel', to: 'cancelled', assign: (_, e) => ({ reason: e.reason }) },
  { from: 'idle', on: 'InactivityTimeout', to: 'completed' },
  { from: 'running', on: 'InteractionComplete', to: 'idle', when: (_, e) => e.success, label: 'success' },
  {
    from: 'running',
    on: 'InteractionComplete',
    to: 'error',
    when: (_, e) => !e.success,
    label: 'error',
    assign: (_, e) => ({ error: e.error ?? 'interaction failed' }),
  },
  { from: 'running', on: 'Pause', to: 'paused', assign: (_, e) => ({ reason: e.reason }) },
  { from: 'running', on: 'Cancel', to: 'cancelled', assign: (_, e) => ({ reason: e.reason }) },
  { from: 'paused', on: 'ProcessInteraction', to: 'idle', assign: (_, e) => ({ userId: e.userId, reason: undefined }) },
  { from: 'paused', on: 'InactivityTimeout', to: 'completed' },
  { from: '*', on: 'Error', to: 'error', assign: (_, e) => ({ error: e.error }) },
  { from: '*', on: 'Cancel', to: 'cancelled', assign: (_, e) => ({ reason: e.reason }) },
  // DESIGN.md resolutions: Ping restarts the inactivity clock and Shutdown stops the running actor;
  // neither changes the state name, so the session can be respawned and hydrated later.
  { from: '*', on: 'Ping', source: 'design', note: 'keep-alive: restarts the inactivity clock' },
  { from: '*', on: 'Shutdown', source: 'design', note: 'stops the running actor; the state is kept for respawn' },
];

/**
 * The ChatActor lifecycle of seed 000: `idle`, `running`, `paused`, and the terminal `error`,
 * `cancelled` and `completed`.
 *
 * @example
 * ```ts
 * import { chatActor } from 'runestream';
 * let s = chatActor.initial();                       // { value: 'idle' }
 * s = chatActor.transition(s, { type: 'ProcessInteraction', userId: '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21' });
 * console.log(s.value);                              // Logs: running
 * console.log(chatActor.step(s, { type: 'InactivityTimeout' }));
 * // Logs: { accepted: false, state: ..., code: 'not_allowed', reason: ... }
 * ```
 */
export const chatActor = defineMachine<S, E>({
  id: 'chat-actor',
  states: ChatActorStateName.options,
  terminal: ['error', 'cancelled', 'completed'],
  events: eventTypesOf(ChatActorEvent),
  schemas: { state: ChatActorState, event: ChatActorEvent, input: z.void() },
  initial: () => ({ value: 'idle' }),
  table,
});
