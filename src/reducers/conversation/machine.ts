import { NO_USAGE, addUsage } from '../budget.js';
import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { ConversationEvent, ConversationInput, ConversationPayloads, ConversationState, ConversationStateName, type TurnOutcome } from './schema.js';

type S = ConversationState;
type E = ConversationEvent;
type P = typeof ConversationPayloads;

/** The payload of a kind whose seed row gives none. */
const none = () => ({});
/** The `session.closing` payload. */
const closing = (_: S, e: { reason?: string | undefined }) => ({ reason: e.reason });

/** Back to active: the suspension's reason and budget report no longer apply, nor do the errors that led to it. */
const unsuspend = () => ({ reason: undefined, budgetInfo: undefined, consecutiveErrors: undefined });

/** A turn's end adds the turn's usage (an extension of the seed's payload) to the conversation's. */
const USAGE_NOTE =
  "the event carries the turn's `outcome`, counted into `consecutiveErrors`, and is sent only when that changes them; in older logs it carries the turn's `usage` too, summed into `usage` (extensions of the seed's payload)";
const used = (s: S, e: { usage?: S['usage'] }): Partial<S> => (e.usage === undefined ? {} : { usage: addUsage(s.usage, e.usage) });
/** Errors in a row: one more for an error, none after a completed turn (no outcome: completed), as they were after an interrupted one. */
const errorsAfter = (s: S, e: { outcome?: TurnOutcome | undefined }): Partial<S> => {
  if (e.outcome === 'error') return { consecutiveErrors: (s.consecutiveErrors ?? 0) + 1 };
  return e.outcome === 'interrupted' || s.consecutiveErrors === undefined ? {} : { consecutiveErrors: undefined };
};
/** A turn's end: its usage added, its outcome counted. */
const turnEnded = (s: S, e: { usage?: S['usage']; outcome?: TurnOutcome | undefined }): Partial<S> => ({ ...used(s, e), ...errorsAfter(s, e) });

/** Seed 003 Session diagram, edge for edge, with the rune kinds of its "Session Events" table. */
const table: readonly Row<S, E, P>[] = [
  { from: 'created', on: 'first_message', to: 'active', kind: 'session.activated', payload: (s) => ({ rootAgentId: s.rootAgentId }) },
  {
    from: 'created',
    on: 'agent_ready',
    to: 'active',
    kind: 'session.activated',
    assign: (_, e) => ({ rootAgentId: e.rootAgentId }),
    payload: (_, e) => ({ rootAgentId: e.rootAgentId }),
  },
  { from: 'active', on: 'new_turn', assign: (s) => ({ turns: (s.turns ?? 0) + 1 }) },
  { from: 'active', on: 'turn_completed', assign: turnEnded, note: USAGE_NOTE },
  {
    from: 'active',
    on: 'pause_requested',
    to: 'paused',
    kind: 'session.paused',
    assign: (_, e) => ({ reason: e.reason }),
    payload: (_, e) => ({ reason: e.reason }),
  },
  {
    from: 'active',
    on: 'budget_exhausted',
    to: 'suspended',
    kind: 'session.suspended',
    assign: (_, e) => ({ reason: e.reason, budgetInfo: e.budgetInfo }),
    payload: (_, e) => ({ reason: e.reason ?? e.type, budgetInfo: e.budgetInfo }),
  },
  {
    from: 'active',
    on: 'error_threshold',
    to: 'suspended',
    kind: 'session.suspended',
    assign: (_, e) => ({ reason: e.reason }),
    payload: (_, e) => ({ reason: e.reason ?? e.type }),
  },
  {
    from: ['active', 'paused', 'suspended'],
    on: 'close_requested',
    to: 'closing',
    kind: 'session.closing',
    assign: (_, e) => ({ reason: e.reason }),
    payload: closing,
  },
  {
    from: 'created',
    on: 'close_requested',
    to: 'closing',
    kind: 'session.closing',
    assign: (_, e) => ({ reason: e.reason }),
    payload: closing,
    note: 'the rune table\'s "* -> closing", which the diagram does not draw from created',
  },
  { from: 'paused', on: 'resume_requested', to: 'active', kind: 'session.resumed', assign: () => ({ reason: undefined }), payload: none },
  {
    from: 'suspended',
    on: 'budget_replenished',
    to: 'active',
    kind: 'session.unsuspended',
    assign: (s, e) => ({ ...unsuspend(), budget: e.budget ?? s.budget }),
    payload: none,
    note: "the event may carry the new limits (`budget`, an extension of the seed's payload), which replace the configured ones; usage keeps counting",
  },
  { from: 'suspended', on: 'reset', to: 'active', kind: 'session.unsuspended', assign: unsuspend, payload: none },
  {
    from: 'closing',
    on: 'cleanup_complete',
    to: 'closed',
    kind: 'session.closed',
    assign: (_, e) => ({ finalStats: e.finalStats }),
    payload: (_, e) => ({ finalStats: e.finalStats }),
  },
  { from: 'closed', on: 'archive_requested', to: 'archived' },
  {
    from: ['paused', 'suspended', 'closing'],
    on: 'turn_completed',
    assign: turnEnded,
    source: 'extension',
    note: 'the turn in flight when the session paused, was suspended or began closing still ends, and what it used is counted',
  },
];

/**
 * The conversation (session) lifecycle of seed 003: `created` -> `active` (with `paused` and
 * `suspended` detours) -> `closing` -> `closed` -> the terminal `archived`. Each rune kind's payload
 * is in `ConversationPayloads`.
 *
 * @example
 * ```ts
 * import { conversation } from 'runestream';
 * let s = conversation.initial({ conversationId: 'conv-1' });                  // created
 * s = conversation.transition(s, { type: 'agent_ready', rootAgentId: 'a1' });   // active
 * s = conversation.transition(s, { type: 'pause_requested', reason: 'lunch' }); // paused
 * console.log(conversation.step(s, { type: 'new_turn' }));
 * // Logs: { accepted: false, state: ..., code: 'not_allowed', reason: 'event "new_turn" is not allowed in state "paused"' }
 * ```
 */
export const conversation = defineMachine<S, E, ConversationInput, P>({
  id: 'conversation',
  states: ConversationStateName.options,
  terminal: ['archived'],
  events: eventTypesOf(ConversationEvent),
  schemas: { state: ConversationState, event: ConversationEvent, input: ConversationInput },
  initial: ({ conversationId, config }) => ({ value: 'created', conversationId, config, usage: NO_USAGE }),
  table,
  payloads: ConversationPayloads,
  spawnPayload: ({ conversationId, config }) => ({ conversationId, config }),
  spawnKind: 'session.created',
  // Seed 003: closing ends with the runelog sealed; archival moves it, sealed, to cold storage.
  seals: ['closed', 'archived'],
  // Seed 003, paused: "No new turns accepted" (the turn in flight goes on): a start is refused, nothing appended.
  holds: { paused: ['start_turn'] },
});
