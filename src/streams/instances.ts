import { foldEvents, foldRune } from '../reducers/fold.js';
import type { AnyMachine } from '../reducers/machine.js';
import type { Rune } from '../reducers/rune.js';
import type { Committable } from './commit-queue.js';
import type { Hold, Seals } from './seals.js';
import type { SnapshotSubject } from './snapshots.js';
import { StreamReadError } from './stream-read-error.js';
import type { RuneStore, StreamHead } from './store.js';
import { hydrationChannel, type HydrationReport } from './diagnostics.js';

/** A machine instance in memory. Kept small: a million of them may be idle at once. */
export interface Instance extends Committable, SnapshotSubject {
  readonly stream: string;
  readonly machine: AnyMachine;
  /** Includes accepted events whose runes are not durable yet. */
  state: unknown;
  seq: number;
  /** The `at` of its last rune: a later rune's `at` is never earlier. */
  at: number;
  /** What subscribers see: the state as of the last durable rune (set by the commit queue). */
  durableState: unknown;
  durableSeq: number;
  /** Durable runes since the last snapshot. */
  sinceSnapshot: number;
  /** Leave memory as soon as every rune is durable. */
  releasing: boolean;
  /** Why it is sealed (see `Seals`), as of the seal generation `sealGeneration`: checked again only when a new seal is made. */
  sealedBy: string | undefined;
  /** What holds back some of its events (see `Seals.hold`), as of the same generation. */
  heldBy: Hold | undefined;
  sealGeneration: number;
}

/** Events read per page when hydrating. */
const HYDRATION_PAGE = 10_000;

/** A stored stream whose machine this engine does not host: a configuration mistake, not a crash. */
export const unknownMachine = (stream: string, machine: string): StreamReadError =>
  new StreamReadError('unknown_machine', `stream "${stream}" was spawned as machine "${machine}", which this engine does not host`);

export const isUnknownMachine = (error: unknown): error is StreamReadError => error instanceof StreamReadError && error.code === 'unknown_machine';

/**
 * The engine's instances in memory, by stream, and the loads in progress.
 *
 * 1. {@link load} gives the instance in memory at once, or hydrates it from the store: from its
 *    newest snapshot, folding the events after it (`foldEvents`) up to the head the store gave at
 *    the start; a log that ends before its head is a `StreamReadError` `log_mismatch`. The runes
 *    another writer commits meanwhile, {@link arrived} from the store's tail, are folded on top,
 *    so the instance enters memory as the store has it then. Two loads of a stream share one.
 * 2. {@link claim} is how a spawn gets its stream: while the store is asked whether the stream
 *    exists, every load of it waits for the claim; the new instance enters memory in the same
 *    synchronous step as `admit` puts its seq-1 rune in the commit queue, so no load can see the
 *    instance before its spawn rune is queued, and no dispatch can queue a seq 2 ahead of it.
 * 3. An instance whose seq race was lost stays in memory while it is brought up to the store's
 *    head ({@link catchUp}); a load meanwhile waits for that.
 * 4. An instance leaves memory when it is {@link forget}ten (the store refused its runes) or
 *    {@link release}d (at once if every rune is durable, else once they are).
 */
export class Instances {
  readonly #store: RuneStore;
  readonly #machines: Readonly<Record<string, AnyMachine>>;
  readonly #memory = new Map<string, Instance>();
  /** Hydrations and spawn claims in progress, so two callers never build the same instance twice. */
  readonly #loading = new Map<string, Promise<Instance | undefined>>();
  /** Instances in memory being brought up to the store's head after a lost seq race: a load waits for that. */
  readonly #catchingUp = new Map<string, Promise<Instance>>();
  /** Per load in progress, the runes other writers committed to its stream meanwhile. */
  readonly #arrived = new Map<string, Rune[]>();
  readonly #seals: Seals | undefined;
  readonly #inMemory = (stream: string): Instance | undefined => this.#memory.get(stream);

  readonly #onEnter: ((instance: Instance, loading: Promise<Instance | undefined>) => void) | undefined;
  /** Told of a hydration whose read of the stream's runes failed (a damaged rune: the engine reports it). */
  readonly #onReadFailed: ((stream: string, error: unknown) => void) | undefined;

  /**
   * With `seals`, every load and claim first learns whether an ancestor of its stream is sealed.
   * `entered` hears each instance as it enters memory from a load or claim (before that promise
   * settles), so whoever waits on that load acts on the instance before any later caller can.
   */
  constructor(
    store: RuneStore,
    machines: Readonly<Record<string, AnyMachine>>,
    seals?: Seals,
    entered?: (instance: Instance, loading: Promise<Instance | undefined>) => void,
    readFailed?: (stream: string, error: unknown) => void,
  ) {
    this.#onReadFailed = readFailed;
    this.#store = store;
    this.#machines = machines;
    this.#seals = seals?.enabled === true ? seals : undefined;
    this.#onEnter = entered;
  }

  /** `instance` has entered memory: the waiters of the load or claim that made it act on it first. */
  #entered(instance: Instance): void {
    const loading = this.#loading.get(instance.stream);
    if (loading !== undefined) this.#onEnter?.(instance, loading);
  }

  /** The stream's head, and (with seals) its ancestors' seals learnt, side by side. */
  async #head(stream: string): Promise<StreamHead | undefined> {
    if (this.#seals === undefined) return this.#store.head(stream);
    const [head] = await Promise.all([this.#store.head(stream), this.#seals.learn(stream, this.#inMemory)]);
    return head;
  }

  /** How many instances are in memory. */
  get size(): number {
    return this.#memory.size;
  }

  /** The instance of `stream` in memory, if it is. */
  get(stream: string): Instance | undefined {
    return this.#memory.get(stream);
  }

  /** Whether `instance` is the one in memory under its stream (not one that left memory since). */
  isCurrent(instance: Instance): boolean {
    return this.#memory.get(instance.stream) === instance;
  }

  /** Whether `stream` is in memory or being loaded. */
  has(stream: string): boolean {
    return this.#memory.has(stream) || this.#loading.has(stream);
  }

  /** The instance of `stream`, hydrated from the store if it is not in memory; undefined if unknown. */
  load(stream: string): Instance | Promise<Instance | undefined> {
    const instance = this.#memory.get(stream);
    if (instance !== undefined) return this.#catchingUp.size === 0 ? instance : (this.#catchingUp.get(stream) ?? instance);
    let loadingNow = this.#loading.get(stream);
    if (loadingNow === undefined) {
      const hydrating: Promise<Instance | undefined> = this.#hydrate(stream).finally(() => this.#loaded(stream, hydrating));
      this.#loading.set(stream, (loadingNow = hydrating));
    }
    return loadingNow;
  }

  /**
   * Claims `stream` for a spawn. If the store has the stream already, resolves to it hydrated
   * (`create` and `admit` are not called: the spawn is refused, the loads waiting get the stream).
   * Otherwise `create()` builds the instance, which enters memory, and `admit(instance)` queues
   * its seq-1 rune, both in one synchronous step; unless an ancestor of the stream is sealed: then
   * nothing is created and it resolves to `undefined`. The claim is taken at once, even while a
   * load of the stream is in progress (it waits for that load first): a dispatch made right after
   * the spawn waits for the claim, never for the load that finds nothing.
   *
   * With `rival`, a stream that may not exist beside this one (the same agent's other kind): if
   * it is in memory or in the store, nothing is created, `rival.found()` is called and the claim
   * resolves to `undefined`. It is looked up in the store beside the stream, then in memory again
   * in the step that creates the instance, so of two claims racing for rivals only the first to
   * create wins (within this engine).
   */
  claim(stream: string, create: () => Instance, admit: (instance: Instance) => void, rival?: { readonly stream: string; found(): void }): Promise<Instance | undefined> {
    const before = this.#loading.get(stream);
    const claiming: Promise<Instance | undefined> = (async () => {
      const found = before === undefined ? undefined : await before.catch(() => undefined);
      if (found !== undefined) return found;
      const inMemory = this.#memory.get(stream);
      if (inMemory !== undefined) return inMemory;
      const [head, rivalHead] = await Promise.all([this.#head(stream), rival === undefined ? undefined : this.#store.head(rival.stream)]);
      if (head !== undefined) return this.#hydrate(stream);
      if (this.#seals?.refusal(stream) !== undefined) return undefined;
      if (rival !== undefined && (rivalHead !== undefined || this.#memory.has(rival.stream))) {
        rival.found();
        return undefined;
      }
      const instance = create();
      this.#memory.set(stream, instance);
      admit(instance);
      // Its spawn, committed at once, lost the race to another writer's: the stream is theirs.
      if (this.#memory.get(stream) !== instance) return this.#hydrate(stream);
      this.#entered(instance);
      return instance;
    })().finally(() => this.#loaded(stream, claiming));
    this.#loading.set(stream, claiming);
    return claiming;
  }

  /**
   * The instance of `stream` in memory is being brought up to the store's head (its seq race
   * lost): until {@link caughtUp}, a {@link load} of it gets `ready`, so what is dispatched
   * meanwhile waits for the events that lost, which go first.
   */
  catchUp(stream: string, ready: Promise<Instance>): void {
    this.#catchingUp.set(stream, ready);
  }

  /** The catch-up of `stream` is over: a load gets the instance again. */
  caughtUp(stream: string): void {
    this.#catchingUp.delete(stream);
  }

  /**
   * Another writer's rune, heard from the store's tail: if its stream is being loaded, the load
   * folds it in (if the store had not given it to the load already). Says whether it did.
   */
  arrived(rune: Rune): boolean {
    if (!this.#loading.has(rune.stream)) return false;
    const arrived = this.#arrived.get(rune.stream);
    if (arrived === undefined) this.#arrived.set(rune.stream, [rune]);
    else arrived.push(rune);
    return true;
  }

  /** `loading` of `stream` is done: forgotten, unless a later claim has taken its place meanwhile. */
  #loaded(stream: string, loading: Promise<Instance | undefined>): void {
    if (this.#loading.get(stream) !== loading) return;
    this.#loading.delete(stream);
    this.#arrived.delete(stream);
  }

  /** Drops a stream's instance from memory at once: the next use hydrates what the store holds. */
  forget(stream: string): void {
    this.#memory.delete(stream);
  }

  /** Releases a stream's instance from memory: at once if every rune of it is durable, else once they are. */
  release(stream: string): void {
    const instance = this.#memory.get(stream);
    if (instance === undefined) return;
    if (instance.durableSeq === instance.seq) this.#memory.delete(stream);
    else instance.releasing = true; // its runes are still being appended
  }

  /** Resolves once every load in progress has settled. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#loading.values()]);
  }

  async #hydrate(stream: string): Promise<Instance | undefined> {
    const startedAt = hydrationChannel.hasSubscribers ? performance.now() : undefined;
    const head = await this.#head(stream);
    if (head === undefined) return undefined;
    const machine = Object.hasOwn(this.#machines, head.machine) ? this.#machines[head.machine] : undefined;
    if (machine === undefined) throw unknownMachine(stream, head.machine);
    const snapshot = await this.#store.latestSnapshot(stream);
    let state = snapshot?.state;
    let seq = snapshot?.seq ?? 0;
    // Up to the head read above, not beyond: another writer may append while this reads.
    while (seq < head.seq) {
      const events = await this.#store.readEvents(stream, seq, Math.min(HYDRATION_PAGE, head.seq - seq)).catch((error: unknown) => {
        this.#onReadFailed?.(stream, error);
        throw error;
      });
      if (events.length === 0) break;
      state = foldEvents(machine, state, seq, events);
      seq += events.length;
    }
    if (seq < head.seq) throw new StreamReadError('log_mismatch', `stream "${stream}": the store's head is seq ${head.seq} but its runes end at ${seq}`);
    let { at } = head;
    for (const rune of this.#arrived.get(stream) ?? []) {
      if (rune.seq !== seq + 1) continue; // read already (or, past a gap, left for the next load)
      state = foldRune(machine, state, ++seq, rune.event);
      if (rune.at > at) at = rune.at;
    }
    // Runes since the snapshot count toward the next one, so a stream released often still gets one.
    const sinceSnapshot = seq - (snapshot?.seq ?? 0);
    const instance: Instance = {
      stream,
      machine,
      state,
      seq,
      at,
      durableState: state,
      durableSeq: seq,
      sinceSnapshot,
      releasing: false,
      sealedBy: undefined,
      heldBy: undefined,
      sealGeneration: -1,
    };
    this.#memory.set(stream, instance);
    this.#seals?.hydrated(instance);
    this.#entered(instance);
    if (startedAt !== undefined) hydrationChannel.publish({ machine: machine.id, ms: performance.now() - startedAt } satisfies HydrationReport);
    return instance;
  }
}
