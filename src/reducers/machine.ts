import type { ZodType } from 'zod';

/** Any event a machine accepts: a plain object discriminated by `type`. */
export interface EventObject {
  type: string;
}

/**
 * Why an event was not applied. Stable strings, safe to branch on and to send to clients.
 * - `unknown_event`: the machine has no event of that `type`.
 * - `invalid_event`: the event's payload fails its zod schema.
 * - `terminal_state`: the state accepts no event at all.
 * - `not_allowed`: the event exists but does not apply in the current state (or its guard fails).
 * - `sealed`: the engine's, never a transition's: the stream is under one whose machine `seals` it
 *   (a closed conversation's agents, turns and calls).
 * - `held`: the engine's too: a stream above it holds back events of that type in its state (a
 *   paused conversation takes no `start_turn` for its agents' turns).
 */
export type RejectionCode = 'unknown_event' | 'invalid_event' | 'terminal_state' | 'not_allowed' | 'sealed' | 'held';

/**
 * A rune's payload: the fields its seed's rune table gives for its kind (camelCase), computed when
 * the rune is made, so a client reading runes needs no fold.
 */
export type RunePayload = Readonly<Record<string, unknown>>;

/**
 * The outcome of applying one event: the next state, its rune kind and the rune's payload (absent
 * when its row gives none), or the same state and why.
 */
export type Step<State> =
  | { accepted: true; state: State; kind: string; payload?: RunePayload | undefined }
  | { accepted: false; state: State; code: RejectionCode; reason: string };

/**
 * A machine is data plus a pure, total transition (the XState v5 idea without the runtime).
 *
 * - `transition` never throws. An event that does not apply returns the **same object** (`===`);
 *   an accepted event always returns a new object, even for a self-loop.
 * - `step` is `transition` plus the rune kind of an accepted event, or the reason for a rejection.
 * - `schemas` are the single source of the types: `State`, `Event` and `Input` are inferred from them.
 */
export interface Machine<State, Event extends EventObject, Input = void> {
  /** kebab-case, e.g. `"chat-actor"`; stored with every rune. */
  readonly id: string;
  /**
   * A positive integer, 1 until the machine's events, payloads or states change shape; every rune
   * it writes records it (`v`, absent for version 1), and a stream holding a rune of a newer
   * version than the running code is refused rather than misread.
   */
  readonly version: number;
  initial(input: Input): State;
  transition(state: State, event: Event): State;
  step(state: State, event: Event): Step<State>;
  readonly schemas: {
    readonly state: ZodType<State>;
    readonly event: ZodType<Event>;
    readonly input: ZodType<Input>;
  };
  /** Every state name of a finite machine; empty for a data-state machine. */
  readonly states: readonly string[];
  /** States that accept no event at all. */
  readonly terminal: readonly string[];
  /** Every event type. */
  readonly events: readonly string[];
  /** The rune kind of the first rune of an instance (its spawn), e.g. `"tool.call"`. */
  readonly spawnKind: string;
  /**
   * States in which an instance seals the streams under it (`<stream>/...`): the engine refuses
   * every spawn and dispatch to them with `sealed`. A closed conversation seals its agents.
   * Absent or empty: it seals nothing.
   */
  readonly seals?: readonly string[];
  /**
   * Events the streams under an instance refuse while it is in a state, by state: the engine
   * refuses a dispatch of one of those event types to a stream under it (`<stream>/...`) with
   * `held`, nothing appended. A paused conversation takes no new turn (`{ paused: ['start_turn'] }`).
   * Unlike a seal, a hold ends when the instance leaves the state. Absent: it holds nothing back.
   */
  readonly holds?: Readonly<Record<string, readonly string[]>>;
  /**
   * A view computed from a state for UIs (seed 001's UI flags, say): sent to clients beside the
   * state (a snapshot frame's `derived`, the client's `derived$`), computed again from each state,
   * never stored. Pure and cheap: it runs for every state a client is sent. Absent: none.
   */
  readonly derive?: ((state: State) => unknown) | undefined;
  /** The payload of an instance's spawn rune, from its input and initial state; absent: none. */
  readonly spawnPayload?: ((input: Input, state: State) => RunePayload) | undefined;
  /**
   * What a second spawn of an existing stream is refused with (code `stream_exists`), when the
   * stream id names something a client chose (an agent's name: "agent name "x" is taken").
   * Absent: `stream "<id>" already exists`.
   */
  readonly existsReason?: ((stream: string) => string) | undefined;
  /**
   * Why an instance may not live at `stream` with this (parsed) input: a spawn there is refused
   * with `invalid_stream` and this reason. For machines whose stream id is their identity (an
   * agent registration lives only at `agent-def/<its name>`). Absent: any stream id.
   */
  readonly streamReason?: ((stream: string, input: Input) => string | undefined) | undefined;
  /**
   * Why an instance may not live at `stream` in the agent layout (`agentStreams`: a turn engine
   * only at `<root>/agent/<a>/turn`, an agent's lifecycle only at `<root>/agent/<a>`), where the
   * agent epics would never run it: a spawn there is refused with `invalid_layout` and this
   * reason. Absent: any stream id.
   */
  readonly layoutReason?: ((stream: string) => string | undefined) | undefined;
  /**
   * For a machine that is one kind of agent (its turns, its ReAct loop): the stream of the same
   * agent's other kind at `stream`'s place (`.../react` for `.../turn` and the reverse), or
   * `undefined`. An agent id has one kind: while that stream exists, in memory or only in the
   * store, a spawn at `stream` is refused with `agent_kind_conflict`. Absent: no such stream.
   */
  readonly otherKindOf?: ((stream: string) => string | undefined) | undefined;
  /**
   * The input an instance at `stream` gets from the (parsed) input it was spawned with, for a
   * machine whose stream id names part of its input: a turn engine spawned at
   * `<root>/agent/<a>/turn` with no `agentId` gets `a`. Its spawn rune stores the input so
   * completed, so the state folded from the log is the same. Absent: the input as given.
   */
  readonly inputAt?: ((stream: string, input: Input) => Input) | undefined;
  /** A Mermaid `stateDiagram-v2` generated from the machine's table. */
  toMermaid(): string;
}

/** The State type of a machine. */
export type StateOf<M> = M extends Machine<infer S, any, any> ? S : never;
/** The Event type of a machine. */
export type EventOf<M> = M extends Machine<any, infer E, any> ? E : never;
/** The Input type of a machine. */
export type InputOf<M> = M extends Machine<any, any, infer I> ? I : never;
/** Any machine, for code that hosts machines generically. */
export type AnyMachine = Machine<any, EventObject, any>;

/** The default rune kind of a spawn, for machines whose seed names none. */
export const DEFAULT_SPAWN_KIND = 'spawned';
