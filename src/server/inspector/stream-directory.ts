import { Observable, Subject, bufferTime, filter, map, type SchedulerLike, type Subscription } from 'rxjs';
import type { Rune } from '../../reducers/rune.js';
import type { StreamHead } from '../../streams/store.js';

/** One stream as the inspector lists it: its machine, its state's name, its last seq and when it last changed. */
export interface DirectoryEntry {
  readonly stream: string;
  readonly machine: string;
  readonly seq: number;
  /** Its state's name (`value`), when its state has one. */
  readonly value?: string;
  /** When its last rune was made (ms since the epoch). */
  readonly at: number;
}

/** Where a {@link StreamDirectory} learns of streams: the stored heads, then every live rune. */
export interface DirectorySource {
  heads(): AsyncIterable<StreamHead>;
  readonly runes$: Observable<Rune>;
}

/** Options of a {@link StreamDirectory}, with their defaults. */
export interface DirectoryOptions {
  /**
   * The most streams it keeps. Past it, the least recently active tenth is dropped (a stream
   * that changes again comes back). Default 100,000.
   */
  readonly maxStreams?: number;
  /** How long changes are gathered before `changes$` emits them, one entry per stream. Default 100 ms. */
  readonly batchMs?: number;
  readonly scheduler?: SchedulerLike;
}

const entryOfHead = (head: StreamHead): DirectoryEntry => ({
  stream: head.stream,
  machine: head.machine,
  seq: head.seq,
  ...(head.value === undefined ? {} : { value: head.value }),
  at: head.at,
});

const entryOfRune = (rune: Rune, before: DirectoryEntry | undefined): DirectoryEntry => {
  const value = rune.to ?? before?.value;
  return { stream: rune.stream, machine: rune.machine, seq: rune.seq, ...(value === undefined ? {} : { value }), at: rune.at };
};

/**
 * Every stream of the log with its machine, state name, seq and last activity, kept live for
 * the inspector's list: listed once from the store's heads, then moved on by every live rune.
 *
 * 1. Live runes are heard from the start, before the listing: a head listed older than what a
 *    live rune already said is ignored, so the listing never moves a stream back.
 * 2. `changes$` emits the entries that changed, gathered for `batchMs` (the last one per stream),
 *    so a stream streaming deltas costs the page one row update per batch, not one per rune.
 * 3. Bounded by `maxStreams`: a log of more streams keeps the most recently active.
 */
export class StreamDirectory {
  readonly #entries = new Map<string, DirectoryEntry>();
  readonly #changed = new Subject<DirectoryEntry>();
  readonly #maxStreams: number;
  readonly #subscription: Subscription;
  /** Resolves once the stored heads are listed (or their listing failed: see `listingError`). */
  readonly ready: Promise<void>;
  /** Why the listing of stored heads failed, if it did: the directory then holds the live streams only. */
  listingError: unknown;
  /** The changes, gathered for `batchMs`: one entry per stream that changed, its latest. */
  readonly changes$: Observable<DirectoryEntry[]>;

  constructor(source: DirectorySource, options: DirectoryOptions = {}) {
    const { maxStreams = 100_000, batchMs = 100, scheduler } = options;
    if (!Number.isSafeInteger(maxStreams) || maxStreams < 1) throw new TypeError(`inspector: "maxStreams" must be a positive integer, got ${String(maxStreams)}`);
    this.#maxStreams = maxStreams;
    this.#subscription = source.runes$.subscribe((rune) => this.#put(entryOfRune(rune, this.#entries.get(rune.stream))));
    this.ready = this.#list(source).catch((error: unknown) => {
      this.listingError = error;
    });
    const gathered$ = scheduler === undefined ? this.#changed.pipe(bufferTime(batchMs)) : this.#changed.pipe(bufferTime(batchMs, scheduler));
    this.changes$ = gathered$.pipe(
      filter((entries) => entries.length > 0),
      map((entries) => [...new Map(entries.map((entry) => [entry.stream, entry])).values()]),
    );
  }

  /** How many streams it holds. */
  get size(): number {
    return this.#entries.size;
  }

  /** The entry of `stream`, if it holds one. */
  get(stream: string): DirectoryEntry | undefined {
    return this.#entries.get(stream);
  }

  /**
   * Every entry, one at a time, live: in the order they last changed, and an entry that changes
   * while a reader is part way moves to the end, so the reader meets it again in its latest form.
   * When it is done, every entry it gave is the latest (what changes after that, `changes$` tells).
   * Holds no copy of the list: how the inspector's feed pages it, however many streams there are.
   */
  cursor(): Iterator<DirectoryEntry> {
    return this.#entries.values();
  }

  /** Every entry, most recently active first. */
  entries(): DirectoryEntry[] {
    return [...this.#entries.values()].sort((a, b) => b.at - a.at || (a.stream < b.stream ? -1 : 1));
  }

  /** Stops hearing runes and ends `changes$`. */
  close(): void {
    this.#subscription.unsubscribe();
    this.#changed.complete();
  }

  async #list(source: DirectorySource): Promise<void> {
    for await (const head of source.heads()) {
      const known = this.#entries.get(head.stream);
      if (known === undefined || known.seq < head.seq) this.#put(entryOfHead(head), false);
    }
  }

  #put(entry: DirectoryEntry, announce = true): void {
    const known = this.#entries.get(entry.stream);
    if (known !== undefined && known.seq > entry.seq) return; // a rune older than what is known
    this.#entries.delete(entry.stream); // to the end: the order of `cursor`
    this.#entries.set(entry.stream, entry);
    if (this.#entries.size > this.#maxStreams) this.#evict();
    if (announce) this.#changed.next(entry);
  }

  /** Drops the least recently active tenth (at least one): amortised, not a sort per new stream. */
  #evict(): void {
    const drop = Math.max(1, Math.floor(this.#maxStreams / 10));
    const oldest = [...this.#entries.values()].sort((a, b) => a.at - b.at).slice(0, drop);
    for (const entry of oldest) this.#entries.delete(entry.stream);
  }
}
