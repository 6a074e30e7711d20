import { z } from 'zod';
import type { AnyMachine, EventObject, EventOf, InputOf, StateOf } from './machine.js';
import { RuneOrigin } from './rune-origin.js';

/**
 * A rune: one accepted event in the durable log.
 * `seq` counts from 1 per stream without gaps; `kind` is the seed's rune kind or the event type;
 * `from` / `to` are the state names around a finite machine's transition; `at` is scheduler time (ms);
 * `payload` carries the seed's fields of its kind (see `runePayloadSchemas`); `v` the version of the
 * machine that wrote it, absent for version 1 (every rune written before machines had versions);
 * `origin` what its event came from (a client, an epic, a timer, a model call, a tool run).
 * The first rune of a stream is its spawn: `event` is `{ type: 'spawn', input }` and `kind` the
 * machine's `spawnKind`.
 */
export const Rune = z.object({
  stream: z.string().min(1),
  seq: z.number().int().positive(),
  machine: z.string().min(1),
  kind: z.string().min(1),
  event: z.looseObject({ type: z.string() }),
  from: z.string().optional(),
  to: z.string().optional(),
  at: z.number(),
  /**
   * The seed's payload fields of the rune's kind (camelCase), computed when the rune was made;
   * absent for a kind that has none. Its schema per kind: `runePayloadSchemas(machine)`.
   */
  payload: z.record(z.string(), z.unknown()).optional(),
  /** The version of the machine that wrote it (`Machine.version`); absent: version 1. */
  v: z.number().int().positive().optional(),
  /** What its event came from (see {@link RuneOrigin}); absent only on a rune written before runes had origins. */
  origin: RuneOrigin.optional(),
});
type RuneShape = z.infer<typeof Rune>;

/** The event of a rune whose machine is not known: any object with a string `type`. */
export type AnyRuneEvent = RuneShape['event'];

/**
 * A rune whose `event` is an `Event` and whose `from` / `to` are `StateName`s. The schema above is
 * the single source; the defaults give its own inferred shape. A machine's runes are
 * {@link RuneOf}, which `ofMachine` narrows to.
 */
export type Rune<Event extends EventObject = AnyRuneEvent, StateName extends string = string> = Omit<RuneShape, 'event' | 'from' | 'to'> & {
  event: Event;
  from?: StateName;
  to?: StateName;
};

/** The event of a stream's first rune. */
export const SPAWN_EVENT_TYPE = 'spawn';

/** The event of a stream's first rune, carrying the machine's input. */
export type SpawnEvent<Input = unknown> = { type: typeof SPAWN_EVENT_TYPE; input: Input };

/** The state names of a finite machine (its state's `value`); `string` for a data-state machine. */
export type StateNameOf<M> = StateOf<M> extends { value: infer Name extends string } ? Name : string;

/**
 * The runes of machine `M`: its events plus the spawn, with its state names. Distributes over a
 * union of machines (a union of their runes, told apart by {@link isRuneOf}).
 */
export type RuneOf<M extends AnyMachine> = M extends AnyMachine ? Rune<EventOf<M> | SpawnEvent<InputOf<M>>, StateNameOf<M>> : never;

/**
 * Whether a rune is one of `machine`'s, narrowing it to {@link RuneOf}. Sound because the engine
 * appends a stream's runes only after its machine accepted the event (or as its spawn).
 */
export const isRuneOf = <M extends AnyMachine>(machine: M, rune: Rune<EventObject>): rune is RuneOf<M> => rune.machine === machine.id;
