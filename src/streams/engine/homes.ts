import type { AnyMachine } from '../../reducers/machine.js';
import type { Rune } from '../../reducers/rune.js';
import type { RuneOrigin } from '../../reducers/rune-origin.js';
import type { CommitQueue, PendingRune } from '../commit-queue.js';
import type { Seals } from '../seals.js';
import type { RuneStore } from '../store.js';
import type { DispatchSink } from '../submit.js';
import { applyEvent } from './apply.js';
import { hydrate, headOf, type HydrationSource } from './hydrate.js';
import { isRefusedStream, newerVersion, type Instance } from './instance.js';
import type { Outlets } from './outlets.js';
import { answerLosers, foldTheirs, readUp, triesAfterLoss } from './other-writers.js';
import { rejected } from './rejections.js';
import { homeAtRest, type StreamHome, type WaitingEvent } from './stream-home.js';

/** What {@link Homes} works with. */
export interface HomesOf {
  readonly store: RuneStore;
  readonly machines: Readonly<Record<string, AnyMachine>>;
  readonly seals: Seals;
  readonly commits: CommitQueue<Instance>;
  readonly outlets: Outlets;
  /** A spawn or a retried event that lost the seq race this many times in a row is refused (`contention`). */
  readonly maxRaceLosses: number;
  /** Told of a read that found a stream's stored runes damaged. */
  readonly readFailed: (stream: string, error: unknown) => void;
}

/**
 * The engine's streams: each instance in memory, and the home of each stream that is loading,
 * catching up or holding other writers' runes. Everything that happens to one stream happens
 * here, in the order it came:
 *
 * 1. {@link enter} applies an event to the stream's instance at once when it is at rest in memory;
 *    otherwise the event waits in the stream's home, behind those already waiting, for the load
 *    (hydration from the store, see `hydrate`) or catch-up in progress, started if need be. When
 *    that is over, the waiting events are applied in order: none dispatched later overtakes them.
 * 2. {@link claim} is how a spawn gets its stream: a load in progress is waited for first (the events
 *    that waited for it are answered as it found the stream), then the store is asked; the new
 *    instance enters memory in the same synchronous step as its spawn rune is queued.
 * 3. Several writers: a rune this engine queued that lost the seq race to another writer
 *    ({@link lost}) rolls the instance back to its durable state; the store's newer runes are read
 *    and folded, and the events that lost are applied again first (a spawn that lost is refused
 *    as `stream_exists`; an event that lost `maxRaceLosses` times in a row as `contention`). Other
 *    writers' runes from the store's tail ({@link heard}) are folded into an instance whose own
 *    runes are all durable, wait behind its own runes still on their way, are folded by a load in
 *    progress, and reach the subscribers of a stream not in memory.
 * 4. An instance leaves memory when it is forgotten (the store refused its runes, or runes were
 *    missed) or released (once every rune of it is durable), and after a terminal state.
 */
export class Homes {
  readonly #memory = new Map<string, Instance>();
  readonly #homes = new Map<string, StreamHome>();
  readonly #store: RuneStore;
  readonly #seals: Seals;
  readonly #commits: CommitQueue<Instance>;
  readonly #outlets: Outlets;
  readonly #maxRaceLosses: number;
  readonly #source: HydrationSource;
  #closed = false;

  constructor({ store, machines, seals, commits, outlets, maxRaceLosses, readFailed }: HomesOf) {
    this.#store = store;
    this.#seals = seals;
    this.#commits = commits;
    this.#outlets = outlets;
    this.#maxRaceLosses = maxRaceLosses;
    this.#source = { store, machines, seals: seals.enabled ? seals : undefined, inMemory: (stream) => this.#memory.get(stream), readFailed };
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

  /**
   * The instance of `stream` for a reader: the one in memory (once it is caught up, after a lost
   * seq race), else hydrated from the store; `undefined` for a stream the store does not have.
   */
  load(stream: string): Instance | Promise<Instance | undefined> {
    const instance = this.#memory.get(stream);
    const home = this.#homes.size === 0 ? undefined : this.#homes.get(stream);
    if (instance !== undefined) return home?.catchingUp === true ? home.ready! : instance;
    // Left memory while it was caught up (released, or runes missed): a load of what the store holds
    // takes the catch-up's place, and its waiting events with it.
    return home?.ready !== undefined && !home.catchingUp ? home.ready : this.#startLoad(stream);
  }

  /** Applies an event to `stream`: at once when its instance is at rest in memory, else in order once it is loaded or caught up. */
  enter<T>(stream: string, event: unknown, dispatchedAt: number, origin: RuneOrigin, sink: DispatchSink<T>, token: T): void {
    const home = this.#homes.size === 0 ? undefined : this.#homes.get(stream);
    if (home?.ready === undefined) {
      const instance = this.#memory.get(stream);
      if (instance !== undefined) return applyEvent(instance, event, dispatchedAt, origin, sink, token, this.#seals, this.#commits);
      void this.#startLoad(stream); // its outcome reaches the events waiting for it
    }
    this.#homes.get(stream)!.waiting.push({ event, dispatchedAt, origin, sink, token });
  }

  /**
   * Claims `stream` for a spawn. If the store has the stream already, resolves to it hydrated
   * (`create` and `admit` are not called: the spawn is refused, the events waiting get the stream).
   * Otherwise `create()` builds the instance, which enters memory, and `admit(instance)` queues its
   * seq-1 rune, both in one synchronous step; unless an ancestor of the stream is sealed: then
   * nothing is created and it resolves to `undefined`. The claim is taken at once, even while a
   * load of the stream is in progress: an event dispatched after the spawn waits for the claim,
   * never for the load that finds nothing (the events dispatched before it are answered by what
   * that load found).
   *
   * With `rival`, a stream that may not exist beside this one (the same agent's other kind): if it
   * is in memory or in the store, nothing is created, `rival.found()` is called and the claim
   * resolves to `undefined`. It is looked up in the store beside the stream, then in memory again
   * in the step that creates the instance, so of two claims racing for rivals the first to create wins.
   */
  claim(stream: string, create: () => Instance, admit: (instance: Instance) => void, rival?: { readonly stream: string; found(): void }): Promise<Instance | undefined> {
    const home = this.#home(stream);
    const before = home.ready;
    const waitedBefore = before === undefined ? [] : home.waiting.slice(home.from);
    home.waiting = [];
    home.from = 0;
    home.catchingUp = false;
    home.arrived ??= [];
    const claiming: Promise<Instance | undefined> = (async () => {
      const found = before === undefined ? undefined : await before.catch(() => undefined);
      for (const waited of waitedBefore) this.#answer(stream, waited, found);
      if (found !== undefined) return found;
      const inMemory = this.#memory.get(stream);
      if (inMemory !== undefined) return inMemory;
      const [head, rivalHead] = await Promise.all([headOf(this.#source, stream), rival === undefined ? undefined : this.#store.head(rival.stream)]);
      if (head !== undefined) return this.#hydrate(stream);
      if (this.#seals.refusal(stream) !== undefined) return undefined;
      if (rival !== undefined && (rivalHead !== undefined || this.#memory.has(rival.stream))) {
        rival.found();
        return undefined;
      }
      const instance = create();
      this.#memory.set(stream, instance);
      admit(instance);
      // Its spawn, committed at once, lost the race to another writer's: the stream is theirs.
      if (this.#memory.get(stream) !== instance) return this.#hydrate(stream);
      return instance;
    })();
    this.#await(stream, home, claiming);
    return claiming;
  }

  /** Stops taking events: those waiting, and those that come, are refused as `closed`. */
  close(): void {
    this.#closed = true;
  }

  /** Resolves once no load, claim or catch-up is in progress (those they start included). */
  async settled(): Promise<void> {
    for (;;) {
      const busy = [...this.#homes.values()].flatMap((home) => (home.ready === undefined ? [] : [home.ready]));
      if (busy.length === 0) return;
      await Promise.allSettled(busy);
    }
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

  /** One of this engine's runes is durable and published (`current`: its instance is still the one in memory). */
  published(instance: Instance, rune: Rune, current: boolean): void {
    // A terminal state accepts no event: keeping the instance would only hold memory. Its state
    // stays in the log, where a later subscriber hydrates it from.
    if (rune.to !== undefined && instance.machine.terminal.length > 0 && instance.machine.terminal.includes(rune.to)) instance.releasing = true;
    if (instance.releasing && instance.durableSeq === instance.seq && current) this.#memory.delete(instance.stream);
    if (this.#homes.size > 0) this.#settleBehind(instance.stream);
  }

  /** The store refused `stream`'s runes: its instance leaves memory, and the next use hydrates what the store holds. */
  refused(stream: string): void {
    this.#memory.delete(stream);
    if (this.#homes.size > 0) this.#settleBehind(stream);
  }

  /**
   * Another writer took the seq of `stream`'s runes (`runes`, in seq order, none durable). A spawn
   * among them is refused (the stream exists); every other event is applied again, in order, to
   * the state the store now has, unless it lost `maxRaceLosses` times in a row (`contention`).
   * The instance goes back to its durable state and is brought up to the store's head (the other
   * writers' runes held behind it folded first, the rest read), each rune published once, in seq
   * order; the events dispatched meanwhile wait behind the ones that lost.
   */
  lost(stream: string, runes: readonly PendingRune<Instance>[]): void {
    const { instance } = runes[0]!;
    const { retries, answered } = triesAfterLoss(runes, this.#maxRaceLosses);
    if (instance.durableSeq === 0 || !this.isCurrent(instance)) {
      // Its spawn lost: there is no durable state to go back to. The retries hydrate the stream.
      if (this.isCurrent(instance)) this.#memory.delete(stream);
      this.#settleBehind(stream);
      for (const w of retries) this.enter(stream, w.event, w.dispatchedAt, w.origin, w.sink, w.token);
    } else this.#catchUp(instance, retries);
    answerLosers(answered, stream, this.#maxRaceLosses);
  }

  /**
   * Another writer's durable rune, heard from the store's tail: folded into the instance in memory
   * when it follows its last durable rune and none of its own is on its way (published as if
   * committed here); held behind its own runes on their way; told to the subscribers of a stream
   * not in memory (a load in progress folds it in). A rune that skips ahead drops the instance.
   */
  heard(rune: Rune): void {
    const { stream } = rune;
    const home = this.#homes.size === 0 ? undefined : this.#homes.get(stream);
    if (home?.behind !== undefined) {
      home.behind.push(rune);
      return;
    }
    const { machines } = this.#source;
    if (Object.hasOwn(machines, rune.machine) && newerVersion(rune, machines[rune.machine]!) !== undefined) {
      // Written by newer code: neither folded nor told, in memory or not (it would be misread); the
      // stream leaves memory, and its next use is refused.
      this.#memory.delete(stream);
      return;
    }
    const instance = this.#memory.get(stream);
    if (instance === undefined) return this.#loose(rune, home);
    if (rune.seq <= instance.durableSeq) return; // folded already (hydrated after it was committed)
    if (instance.seq !== instance.durableSeq) {
      this.#home(stream).behind = [rune];
      return;
    }
    if (rune.seq !== instance.durableSeq + 1) {
      // Runes missed: the instance cannot be trusted. The next use hydrates what the store holds.
      this.#memory.delete(stream);
      return this.#loose(rune, home);
    }
    foldTheirs(instance, rune, this.#commits);
  }

  // --- a stream's home ----------------------------------------------------------------------------

  #home(stream: string): StreamHome {
    let home = this.#homes.get(stream);
    if (home === undefined) this.#homes.set(stream, (home = homeAtRest()));
    return home;
  }

  /** Drops `home` once it holds nothing. */
  #leave(stream: string, home: StreamHome): void {
    if (home.ready === undefined && home.behind === undefined && this.#homes.get(stream) === home) this.#homes.delete(stream);
  }

  /** Loads `stream` from the store, in its home: the events dispatched meanwhile wait for it. */
  #startLoad(stream: string): Promise<Instance | undefined> {
    const home = this.#home(stream);
    home.arrived = [];
    home.catchingUp = false;
    const loading = this.#hydrate(stream);
    this.#await(stream, home, loading);
    return loading;
  }

  /** Hydrates `stream` (see `hydrate`), folding on top what its home heard meanwhile, and puts it in memory. */
  async #hydrate(stream: string): Promise<Instance | undefined> {
    const instance = await hydrate(this.#source, stream, () => this.#homes.get(stream)?.arrived);
    if (instance === undefined) return undefined;
    this.#memory.set(stream, instance);
    this.#source.seals?.hydrated(instance);
    return instance;
  }

  /** `ready` is what `home`'s events wait for now: once it settles, they are applied (or refused) in order. */
  #await(stream: string, home: StreamHome, ready: Promise<Instance | undefined>): void {
    home.ready = ready;
    ready.then(
      (found) => this.#drain(stream, home, ready, found),
      (error: unknown) => {
        if (home.ready !== ready) return;
        const waiting = home.waiting.slice(home.from);
        // A catch-up that failed leaves the instance behind the store: the next use hydrates it.
        if (home.catchingUp) this.#memory.delete(stream);
        this.#rest(stream, home);
        for (const w of waiting) {
          if (isRefusedStream(error)) w.sink.result(rejected(error.code, error.message), w.token);
          else w.sink.error(error, w.token);
        }
      },
    );
  }

  /**
   * `ready` settled, finding `found`: the events waiting for it are applied in order. One that
   * starts a catch-up (it lost a seq race) or a load (the instance left memory) stops the drain:
   * the rest wait for that, behind the events that lost.
   */
  #drain(stream: string, home: StreamHome, ready: Promise<Instance | undefined>, found: Instance | undefined): void {
    while (home.ready === ready && home.from < home.waiting.length) {
      if (!this.#closed && found !== undefined && this.#memory.get(stream) === undefined) {
        // It left memory meanwhile: the rest wait for a fresh load, which takes this queue over.
        home.waiting = home.waiting.slice(home.from);
        home.from = 0;
        void this.#startLoad(stream); // its outcome reaches the events waiting for it
        return;
      }
      this.#answer(stream, home.waiting[home.from++]!, found);
    }
    if (home.ready === ready) this.#rest(stream, home);
  }

  /** A waiting event applied to the stream in memory, or refused: the engine closed, or `found` says there is no such stream. */
  #answer(stream: string, w: WaitingEvent, found: Instance | undefined): void {
    const instance = this.#memory.get(stream);
    if (this.#closed) w.sink.result(rejected('closed', 'the engine is closed'), w.token);
    else if (found === undefined || instance === undefined) w.sink.result(rejected('unknown_stream', `unknown stream "${stream}"`), w.token);
    else applyEvent(instance, w.event, w.dispatchedAt, w.origin, w.sink, w.token, this.#seals, this.#commits);
  }

  /** Nothing is in progress in `home` any more. */
  #rest(stream: string, home: StreamHome): void {
    home.ready = undefined;
    home.catchingUp = false;
    home.waiting = [];
    home.from = 0;
    home.arrived = undefined;
    this.#leave(stream, home);
  }

  // --- several writers ----------------------------------------------------------------------------

  /**
   * Brings `instance`, back at its durable state, up to the store's head, then applies `retries`,
   * then the events that were waiting or come meanwhile.
   */
  #catchUp(instance: Instance, retries: WaitingEvent[]): void {
    const { stream } = instance;
    const home = this.#home(stream);
    instance.state = instance.durableState;
    instance.seq = instance.durableSeq;
    home.waiting = [...retries, ...home.waiting.slice(home.from)];
    home.from = 0;
    home.catchingUp = true;
    home.arrived = undefined;
    // Started on the next microtask: registered first, so a dispatch made from inside a subscriber
    // told of the other writers' runes below waits behind the retries.
    this.#await(
      stream,
      home,
      Promise.resolve().then(() => readUp(this.#store, instance, this.#commits, () => this.isCurrent(instance))),
    );
    this.#settleBehind(stream);
  }

  /** A rune of `stream` was published or refused: the other writers' runes held behind this engine's own are heard again, once none of its own is on its way. */
  #settleBehind(stream: string): void {
    const home = this.#homes.get(stream);
    const behind = home?.behind;
    if (behind === undefined) return;
    const instance = this.#memory.get(stream);
    if (instance !== undefined && instance.seq !== instance.durableSeq) return; // more of its own on their way
    home!.behind = undefined;
    this.#leave(stream, home!);
    for (const rune of behind) this.heard(rune);
  }

  /** Another writer's rune of a stream not in memory: a load in progress folds it in; its runes' subscribers hear it; its state's, through a load. */
  #loose(rune: Rune, home: StreamHome | undefined): void {
    const { stream } = rune;
    if (home?.ready !== undefined && !home.catchingUp) home.arrived?.push(rune);
    this.#commits.whilePublishing(() => {
      this.#seals.reached(stream, rune.machine, rune.to);
      this.#outlets.rune(rune);
    });
    if (!this.#outlets.watched(stream)) return;
    const loaded = this.load(stream);
    if (loaded instanceof Promise) {
      loaded.then(
        (instance) => instance !== undefined && this.#outlets.state(stream, instance),
        () => {}, // the next use of the stream meets the error
      );
    } else this.#outlets.state(stream, loaded);
  }
}
