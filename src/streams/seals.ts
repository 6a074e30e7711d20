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

/**
 * Which streams are sealed: a stream whose machine declares `seals` seals every stream under it
 * (`<stream>/...`) once it is in one of those states (a closed conversation, its agents, turns and
 * calls). The engine refuses spawns and dispatches to a sealed stream with `sealed`.
 *
 * 1. Live: every durable rune into a sealing state is {@link reached}; so is a hydrated state.
 * 2. From the store: before a stream is hydrated or spawned, {@link learn} reads the heads of its
 *    ancestors (those not in memory), so after a restart a sealed conversation is known from its
 *    stored head, without hydrating it.
 * 3. {@link refusal} is one size check while nothing is sealed, else a lookup per `/` of the
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
  #generation = 0;

  constructor(store: RuneStore, machines: Readonly<Record<string, AnyMachine>>) {
    this.#store = store;
    for (const machine of Object.values(machines)) {
      if (machine.seals !== undefined && machine.seals.length > 0) this.#sealing.set(machine.id, new Set(machine.seals));
    }
  }

  /** Whether any hosted machine seals: if none does, every method is a no-op. */
  get enabled(): boolean {
    return this.#sealing.size > 0;
  }

  /** How many seals have been made: a {@link refusal} computed at an earlier generation may be stale. */
  get generation(): number {
    return this.#generation;
  }

  /** A stream of `machine` reached state `value` (a durable rune, a hydration): it may seal what is under it. */
  reached(stream: string, machine: string, value: string | undefined): void {
    if (value === undefined || this.#sealing.get(machine)?.has(value) !== true) return;
    const by = `${machine} "${stream}" is ${value}`;
    if (this.#sealed.get(stream) === by) return;
    this.#sealed.set(stream, by);
    this.#generation++;
  }

  /** {@link reached} for an instance's durable state. */
  hydrated(instance: SealSubject): void {
    if (this.#sealing.has(instance.machine.id)) this.reached(instance.stream, instance.machine.id, valueOf(instance.durableState));
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
    if (this.#sealing.size === 0) return;
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
