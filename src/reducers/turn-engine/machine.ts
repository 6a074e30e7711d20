import { z } from 'zod';
import { NO_USAGE, addUsage, responseUsage } from '../budget.js';
import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { TurnEngineEvent, TurnEngineState, TurnEngineStateName } from './schema.js';

type S = TurnEngineState;
type E = TurnEngineEvent;

/** Seed 003 TurnEngine diagram, edge for edge, with the rune kinds of its "Turn Events" table. */
const table: readonly Row<S, E>[] = [
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
      callIds: [],
      reason: undefined,
      error: undefined,
      steerInput: undefined,
      usage: undefined,
      turnUsage: NO_USAGE,
    }),
  },
  { from: 'streaming', on: 'assistant_delta', kind: 'turn.assistant_delta', assign: (s, e) => ({ output: s.output + e.content }) },
  {
    from: 'streaming',
    on: 'tool_calls_received',
    to: 'tool_executing',
    kind: 'turn.tool_calls_received',
    assign: (s, e) => ({ callIds: e.callIds, turnUsage: addUsage(s.turnUsage, responseUsage(e.usage, e.callIds.length, e.cost)) }),
    note: "the response also carries its `usage`, `model` and `cost` (an extension of the seed's payload), summed into `turnUsage` for budgets",
  },
  {
    from: 'streaming',
    on: 'response_done',
    to: 'completed',
    kind: 'turn.completed',
    assign: (s, e) => ({ usage: e.usage, turnUsage: addUsage(s.turnUsage, responseUsage(e.usage, 0, e.cost)) }),
    note: "the seed's `usage`, with the response's `model` and `cost` (an extension of the seed's payload), summed into `turnUsage` for budgets",
  },
  { from: 'streaming', on: 'interrupt', to: 'interrupted', kind: 'turn.interrupted', assign: (_, e) => ({ reason: e.reason }) },
  { from: 'streaming', on: 'steer', to: 'interrupted', kind: 'turn.interrupted', assign: (_, e) => ({ steerInput: e.input }) },
  { from: 'streaming', on: 'stream_error', to: 'error', kind: 'turn.error', assign: (_, e) => ({ error: e.error }) },
  // The seed's guards `continue` / `no_more_calls`, carried by `more`.
  { from: 'tool_executing', on: 'tools_finished', to: 'streaming', when: (_, e) => e.more, label: 'continue', kind: 'turn.tools_finished' },
  { from: 'tool_executing', on: 'tools_finished', to: 'completed', when: (_, e) => !e.more, label: 'no_more_calls', kind: 'turn.completed' },
  { from: 'tool_executing', on: 'interrupt', to: 'interrupted', kind: 'turn.interrupted', assign: (_, e) => ({ reason: e.reason }) },
  { from: 'tool_executing', on: 'tool_crash', to: 'error', kind: 'turn.error', assign: (_, e) => ({ error: e.error }) },
  // "(internal, no rune)" in the seed; every accepted event appends a rune, so its kind is the event type.
  { from: ['interrupted', 'completed', 'error'], on: 'turn_finalized', to: 'idle' },
];

/**
 * The TurnEngine of seed 003: one agent's turns, `idle` -> `streaming` (-> `tool_executing` and back)
 * -> `completed` | `interrupted` | `error` -> `idle` again on `turn_finalized`.
 *
 * @example
 * ```ts
 * import { turnEngine } from 'runestream';
 * let s = turnEngine.initial();                                     // { value: 'idle', turn: 0, ... }
 * s = turnEngine.transition(s, { type: 'start_turn', input: 'hi' }); // streaming, turn 1
 * s = turnEngine.transition(s, { type: 'assistant_delta', content: 'Hel' });
 * console.log(turnEngine.step(s, { type: 'steer', input: 'be brief' }));
 * // Logs: { accepted: true, state: { value: 'interrupted', ... output: 'Hel', ... steerInput: 'be brief', ... }, kind: 'turn.interrupted' }
 * ```
 */
export const turnEngine = defineMachine<S, E>({
  id: 'turn-engine',
  states: TurnEngineStateName.options,
  terminal: [],
  events: eventTypesOf(TurnEngineEvent),
  schemas: { state: TurnEngineState, event: TurnEngineEvent, input: z.void() },
  initial: () => ({ value: 'idle', turn: 0, input: '', output: '', callIds: [], turnUsage: NO_USAGE }),
  table,
});
