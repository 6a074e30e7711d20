import type { ZodType } from 'zod';
import { NO_USAGE, addUsage, responseUsage } from '../budget.js';
import { eventTypesOf } from '../event-types.js';
import { agentLayoutReason, otherAgentKindOf, parseStreamId } from '../stream-ids.js';
import { defineMachine, type Row } from '../table.js';
import { TurnEngineEvent, TurnEngineInput, TurnEnginePayloads, TurnEngineState, TurnEngineStateName } from './schema.js';

type S = TurnEngineState;
type E = TurnEngineEvent;
type P = typeof TurnEnginePayloads;

/** The `turn.completed` payload: the output so far is the final output, and its messages. */
const completed = (_: S, __: E, after: S) => ({ finalOutput: after.output, usage: after.turnUsage, messages: [...messagesOf(after)] });
/**
 * The turn's messages so far. A state hydrated from a snapshot saved before messages were kept
 * has none: its output so far counts as one message, so `output` stays their concatenation.
 */
const messagesOf = (s: S): readonly string[] => s.messages ?? [s.output];
/** A model call begins: its text is a message of its own. */
const newMessage = (s: S): string[] => [...messagesOf(s), ''];
/** A delta of the model call in progress: its message grows. */
const grown = (s: S, content: string): string[] => {
  const messages = messagesOf(s);
  return [...messages.slice(0, -1), (messages.at(-1) ?? '') + content];
};
/** The `turn.interrupted` payload of an `interrupt`: the output streamed before it, and the turn's usage. */
const interrupted = (_: S, e: { reason?: string | undefined }, after: S) => ({ reason: e.reason, partialOutput: after.output, usage: after.turnUsage });
/** The `turn.error` payload: which event failed the turn, its error, and the turn's usage. */
const failed = (_: S, e: { type: 'stream_error' | 'tool_crash'; error: string }, after: S) => ({ errorType: e.type, message: e.error, usage: after.turnUsage });

/** The `reason` of a turn interrupted by a `steer`. */
export const STEERED = 'steered';

/**
 * A response's usage added to the turn's: its tokens, one model call, the tool calls it asked for,
 * and the turn's wall clock so far when the response says it (measured by the effect that heard it).
 */
const withResponse = (s: S, e: { usage?: Readonly<Record<string, unknown>> | undefined; cost?: number | undefined; wallClockMs?: number | undefined }, toolCalls: number) => {
  const sum = addUsage(s.turnUsage, responseUsage(e.usage, toolCalls, e.cost));
  return e.wallClockMs === undefined ? sum : { ...sum, wallClockMs: e.wallClockMs };
};

/** Seed 003 TurnEngine diagram, edge for edge, with the rune kinds of its "Turn Events" table. */
const table: readonly Row<S, E, P>[] = [
  {
    from: 'idle',
    on: 'start_turn',
    to: 'streaming',
    kind: 'turn.started',
    // A new turn starts clean: nothing of the previous turn's output, calls or outcome carries over.
    assign: (s, e) => ({
      turn: s.turn + 1,
      input: e.input,
      output: '',
      messages: [''],
      callIds: [],
      reason: undefined,
      error: undefined,
      steerInput: undefined,
      usage: undefined,
      turnUsage: NO_USAGE,
    }),
    // The turn's number is its id: unique per turn stream, which is the agent's.
    payload: (_, e, after) => ({ turnId: String(after.turn), agentId: after.agentId, input: e.input }),
  },
  {
    from: 'streaming',
    on: 'assistant_delta',
    kind: 'turn.assistant_delta',
    assign: (s, e) => ({ output: s.output + e.content, messages: grown(s, e.content) }),
    payload: (_, e) => ({ content: e.content }),
  },
  {
    from: 'streaming',
    on: 'tool_calls_received',
    to: 'tool_executing',
    kind: 'turn.tool_calls_received',
    assign: (s, e) => ({ callIds: e.callIds, turnUsage: withResponse(s, e, e.callIds.length) }),
    payload: (_, e) => ({ callIds: e.callIds }),
    note: "the response also carries its `usage`, `model`, `cost` and the turn's `wallClockMs` so far (an extension of the seed's payload), summed into `turnUsage` for budgets",
  },
  {
    from: 'streaming',
    on: 'response_done',
    to: 'completed',
    kind: 'turn.completed',
    assign: (s, e) => ({ usage: e.usage, turnUsage: withResponse(s, e, 0) }),
    payload: completed,
    note: "the seed's `usage`, with the response's `model`, `cost` and the turn's `wallClockMs` (an extension of the seed's payload), summed into `turnUsage` for budgets",
  },
  {
    from: 'streaming',
    on: 'model_call_spent',
    kind: 'turn.model_call_spent',
    // Billed though it said nothing: budgets count it now, not when the answer after it ends.
    assign: (s, e) => ({ turnUsage: addUsage(s.turnUsage, responseUsage(e.usage, 0, e.cost)) }),
    payload: (_, e) => ({ usage: e.usage, model: e.model, cost: e.cost }),
    source: 'extension',
    note: 'a call answered with nothing that a provider chain fell over from: billed, so counted in `turnUsage` as a response at once',
  },
  {
    from: 'streaming',
    on: 'interrupt',
    to: 'interrupted',
    kind: 'turn.interrupted',
    // A call cut short that may have been answered (it died with its process) counts, as a response does.
    assign: (s, e) => ({ reason: e.reason, ...(e.usage === undefined ? {} : { turnUsage: addUsage(s.turnUsage, responseUsage(e.usage, 0, undefined)) }) }),
    payload: interrupted,
  },
  {
    from: 'streaming',
    on: 'steer',
    to: 'interrupted',
    kind: 'turn.interrupted',
    assign: (_, e) => ({ reason: STEERED, steerInput: e.input }),
    payload: (_, e, after) => ({ reason: STEERED, partialOutput: after.output, steerInput: e.input, usage: after.turnUsage }),
    note: 'the seed\'s `reason` of a steer is "steered"',
  },
  {
    from: 'streaming',
    on: 'stream_error',
    to: 'error',
    kind: 'turn.error',
    // Calls answered on the way to the failure (empty answers fallen over from) count, as responses do.
    assign: (s, e) => ({ error: e.error, ...(e.usage === undefined ? {} : { turnUsage: addUsage(s.turnUsage, responseUsage(e.usage, 0, undefined)) }) }),
    payload: failed,
  },
  // The seed's guards `continue` / `no_more_calls`, carried by `more`.
  {
    from: 'tool_executing',
    on: 'tools_finished',
    to: 'streaming',
    when: (_, e) => e.more,
    label: 'continue',
    kind: 'turn.tools_finished',
    // The model is called again: what it says next is a new message.
    assign: (s) => ({ messages: newMessage(s) }),
    payload: (before, e) => ({ callIds: before.callIds, resultSummaries: e.resultSummaries }),
  },
  {
    from: 'tool_executing',
    on: 'tools_finished',
    to: 'completed',
    when: (_, e) => !e.more,
    label: 'no_more_calls',
    kind: 'turn.completed',
    payload: completed,
  },
  {
    from: 'tool_executing',
    on: 'interrupt',
    to: 'interrupted',
    kind: 'turn.interrupted',
    assign: (_, e) => ({ reason: e.reason }),
    payload: interrupted,
  },
  { from: 'tool_executing', on: 'tool_crash', to: 'error', kind: 'turn.error', assign: (_, e) => ({ error: e.error }), payload: failed },
  // The seed draws these; its rune table makes them "(internal, no rune)", which `internal` below
  // is. A turn rests in an ending state only when an older log or snapshot left it there.
  { from: ['interrupted', 'completed', 'error'], on: 'turn_finalized', to: 'idle' },
  {
    from: 'idle',
    on: 'turn_finalized',
    source: 'extension',
    note: 'a log written before the internal transitions made a turn idle with it after its ending, where such an ending now lands: it changes nothing',
  },
];

/**
 * The seed's "(internal, no rune)" rows: a turn that completes, fails or is interrupted is idle
 * again in the same step, its rune (`turn.completed`, `turn.error`, `turn.interrupted`) the last
 * of the turn. Its outcome stays in its state (`output`, `error`, `reason`) until the next turn.
 * The seed's rune table lists `completed -> idle` and `error -> idle`; it lists no rune for
 * `interrupted -> idle` either, so that one is internal too.
 */
const INTERNAL = { completed: 'idle', error: 'idle', interrupted: 'idle' } as const satisfies Partial<Record<TurnEngineStateName, TurnEngineStateName>>;

/**
 * The events of a streaming turn that add only to its text and usage so far: what a turn's
 * effects and companions do never depends on them (`unchangedBy`), and there are many a turn.
 */
export const TURN_PROGRESS: readonly TurnEngineEvent['type'][] = ['assistant_delta', 'model_call_spent'];

/** How a turn ended: the state its ending row enters, before the internal transition to `idle`. */
export type TurnEnding = 'completed' | 'error' | 'interrupted';

const ENDING_OF_KIND: Readonly<Record<string, TurnEnding>> = { 'turn.completed': 'completed', 'turn.error': 'error', 'turn.interrupted': 'interrupted' };

/**
 * How the turn a rune ends ended, or `undefined` for a rune that ends none: told by its kind, so
 * it reads runes of every log alike (an older log's ending says `to: 'completed'`, a newer one's
 * `to: 'idle'`, as the internal transition lands it).
 */
export const turnEndingOf = (rune: { readonly machine: string; readonly kind: string }): TurnEnding | undefined =>
  rune.machine === turnEngine.id ? ENDING_OF_KIND[rune.kind] : undefined;

/**
 * The TurnEngine of seed 003: one agent's turns, `idle` -> `streaming` (-> `tool_executing` and back)
 * -> `completed` | `interrupted` | `error`, each `idle` again in the same step (the seed's internal
 * transitions: the ending's rune is the turn's last). Its optional spawn
 * input `{ agentId }` names the agent, for the `turn.started` payload (spawned with none at
 * `<root>/agent/<a>/turn`, the engine gives it `a`); each rune kind's payload is in `TurnEnginePayloads`.
 *
 * @example
 * ```ts
 * import { turnEngine } from 'runestream';
 * let s = turnEngine.initial();                                     // { value: 'idle', turn: 0, ... }
 * s = turnEngine.transition(s, { type: 'start_turn', input: 'hi' }); // streaming, turn 1
 * s = turnEngine.transition(s, { type: 'assistant_delta', content: 'Hel' });
 * console.log(turnEngine.step(s, { type: 'steer', input: 'be brief' }));
 * // Logs: { accepted: true, state: { value: 'idle', ... output: 'Hel', ... reason: 'steered', ... steerInput: 'be brief', ... }, kind: 'turn.interrupted', payload: { reason: 'steered', partialOutput: 'Hel', steerInput: 'be brief', usage: { ... } } }
 * ```
 */
export const turnEngine = defineMachine<S, E, TurnEngineInput | void, P>({
  id: 'turn-engine',
  states: TurnEngineStateName.options,
  terminal: [],
  events: eventTypesOf(TurnEngineEvent),
  // Optional: a turn stream spawned with no input is an agent's all the same, only unnamed.
  schemas: { state: TurnEngineState, event: TurnEngineEvent, input: TurnEngineInput.optional() as ZodType<TurnEngineInput | void> },
  initial: (input) =>
    input?.agentId === undefined
      ? { value: 'idle', turn: 0, input: '', output: '', callIds: [], turnUsage: NO_USAGE }
      : { value: 'idle', agentId: input.agentId, turn: 0, input: '', output: '', callIds: [], turnUsage: NO_USAGE },
  table,
  internal: INTERNAL,
  payloads: TurnEnginePayloads,
  // The agent epics run a turn stream only where the agent layout puts it; an agent has one kind.
  layoutReason: (stream) => agentLayoutReason('turn-engine', stream, 'turn'),
  otherKindOf: otherAgentKindOf,
  // A turn stream spawned with no input (as `runestream serve` tells clients to) is its agent's all the same: named from its id.
  inputAt: (stream, input) => {
    if (input?.agentId !== undefined) return input;
    const parts = parseStreamId(stream);
    return parts?.kind === 'turn' ? { ...input, agentId: parts.agentId } : input;
  },
});
