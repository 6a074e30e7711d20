import type { AnyMachine } from '../reducers/machine.js';
import type { RuneStore } from './store.js';

/** What {@link Seals} needs of an instance in memory. */
interface SealSubject {
  readonly stream: string;
  readonly machine: AnyMachine;
  readonly durableState: unknown;
}

const valueOf = (state: unknown): string | undefined => {
  const value = typeof state === 'object' && state !== null ? (state as { value?: unknown }).value : undefined;
  return typeof value === 'string' ? value : undefined;
};

/** What holds back events of some types for the streams under a stream (see `Machine.holds`). */
export interface Hold {
  /** What holds them: `conversation "conv/c1" is paused`. */
  readonly by: string;
  /** The event types held back. */
  readonly types: ReadonlySet<string>;
}

/**
 * Which streams are sealed: a stream whose machine declares `seals` seals every stream under it
 * (`<stream>/...`) once it is in one of those states (a closed conversation, its agents, turns and
 * calls). The engine refuses spawns and dispatches to a sealed stream with `sealed`.
 *
 * 1. Live: every durable rune into a sealing state is {@link reached}; so is a hydrated state.
 * 2. From the store: before a stream is hydrated or spawned, {@link learn} reads the heads of its
 *    ancestors (those not in memory), so after a restart a sealed conversation is known from its
 *    stored head, without hydrating it.
 * 3. Holds: a stream whose machine declares `holds` holds back events of those types for the
 *    streams under it while it is in a holding state (a paused conversation's `start_turn`), known
 *    the same ways; leaving the state releases them ({@link hold}).
 * 4. {@link refusal} is one size check while nothing is sealed, else a lookup per `/` of the
 *    stream id (about 190 ns). The engine keeps each instance's answer with the {@link generation}
 *    it was computed at and asks again only after a new seal, so a dispatch pays one comparison.
 *    Sealing is for good (no sealing state leads to a non-sealing one), so a sealed stream is
 *    never forgotten.
 */
export class Seals {
  readonly #store: RuneStore;
  /** Per sealing machine id, its sealing states. */
  readonly #sealing = new Map<string, ReadonlySet<string>>();
  /** Per sealed stream, what sealed it ("conversation \"conv/c1\" is closed"). */
  readonly #sealed = new Map<string, string>();
  /** Per holding machine id, the event types each of its holding states holds back. */
  readonly #holding = new Map<string, ReadonlyMap<string, ReadonlySet<string>>>();
  /** Per holding stream, its hold while it is in a holding state (a paused conversation's). */
  readonly #held = new Map<string, Hold>();
  #generation = 0;

  constructor(store: RuneStore, machines: Readonly<Record<string, AnyMachine>>) {
    this.#store = store;
    for (const machine of Object.values(machines)) {
      if (machine.seals !== undefined && machine.seals.length > 0) this.#sealing.set(machine.id, new Set(machine.seals));
      const holds = Object.entries(machine.holds ?? {}).filter(([, types]) => types.length > 0);
      if (holds.length > 0) this.#holding.set(machine.id, new Map(holds.map(([state, types]) => [state, new Set(types)])));
    }
  }

  /** Whether any hosted machine seals or holds: if none does, every method is a no-op. */
  get enabled(): boolean {
    return this.#sealing.size > 0 || this.#holding.size > 0;
  }

  /** How many seals have been made: a {@link refusal} computed at an earlier generation may be stale. */
  get generation(): number {
    return this.#generation;
  }

  /** A stream of `machine` reached state `value` (a durable rune, a hydration): it may seal what is under it, or hold or release it. */
  reached(stream: string, machine: string, value: string | undefined): void {
    const holding = this.#holding.get(machine);
    if (holding !== undefined) this.#hold(stream, machine, value, holding);
    if (value === undefined || this.#sealing.get(machine)?.has(value) !== true) return;
    const by = `${machine} "${stream}" is ${value}`;
    if (this.#sealed.get(stream) === by) return;
    this.#sealed.set(stream, by);
    this.#generation++;
  }

  /** A holding stream in state `value`: held in a holding state, released in any other (a new generation either way). */
  #hold(stream: string, machine: string, value: string | undefined, holding: ReadonlyMap<string, ReadonlySet<string>>): void {
    const types = value === undefined ? undefined : holding.get(value);
    const by = `${machine} "${stream}" is ${value}`;
    if (types === undefined ? !this.#held.has(stream) : this.#held.get(stream)?.by === by) return;
    if (types === undefined) this.#held.delete(stream);
    else this.#held.set(stream, { by, types });
    this.#generation++;
  }

  /** {@link reached} for an instance's durable state. */
  hydrated(instance: SealSubject): void {
    const { id } = instance.machine;
    if (this.#sealing.has(id) || this.#holding.has(id)) this.reached(instance.stream, id, valueOf(instance.durableState));
  }

  /** What holds back events for `stream` (an ancestor in a holding state), or `undefined`. */
  hold(stream: string): Hold | undefined {
    if (this.#held.size === 0) return undefined;
    for (let i = stream.indexOf('/'); i > 0; i = stream.indexOf('/', i + 1)) {
      const hold = this.#held.get(stream.slice(0, i));
      if (hold !== undefined) return hold;
    }
    return undefined;
  }

  /** Why `stream` may not be spawned or dispatched to (an ancestor sealed it), or `undefined`. */
  refusal(stream: string): string | undefined {
    if (this.#sealed.size === 0) return undefined;
    for (let i = stream.indexOf('/'); i > 0; i = stream.indexOf('/', i + 1)) {
      const by = this.#sealed.get(stream.slice(0, i));
      if (by !== undefined) return `stream "${stream}" is sealed: ${by}`;
    }
    return undefined;
  }

  /**
   * Learns from the store whether an ancestor of `stream` is sealed: the heads of the ancestors
   * not in memory (one in memory had its seal recorded when it reached it or was hydrated).
   */
  async learn(stream: string, inMemory: (stream: string) => unknown): Promise<void> {
    if (!this.enabled) return;
    const heads: Promise<void>[] = [];
    for (let i = stream.indexOf('/'); i > 0; i = stream.indexOf('/', i + 1)) {
      const ancestor = stream.slice(0, i);
      if (this.#sealed.has(ancestor)) return;
      if (inMemory(ancestor) !== undefined) continue;
      heads.push(this.#store.head(ancestor).then((head) => head && this.reached(ancestor, head.machine, head.value)));
    }
    await Promise.all(heads);
  }
}
