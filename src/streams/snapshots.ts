import type { RuneStore, Snapshot } from './store.js';

/** What the snapshot schedule reads of an instance (the engine's instances are this). */
export interface SnapshotSubject {
  readonly stream: string;
  readonly machine: { readonly id: string; readonly version: number };
  /** The seq of its last durable rune, and the state after it: what a snapshot saves. */
  readonly durableSeq: number;
  readonly durableState: unknown;
  /** Durable runes since its last snapshot, counted by {@link Snapshots.counted}. */
  sinceSnapshot: number;
}

/** Options of {@link Snapshots}; the engine passes its own `snapshotEvery` and `retention` options. */
export interface SnapshotsOptions {
  /** A snapshot every this many durable runes of a stream (0: never). */
  readonly every: number;
  /** `'snapshot'`: after saving a stream's snapshot, prune the runes it covers. */
  readonly retention: (stream: string, machine: string) => 'all' | 'snapshot';
  /** A save or a prune failed. The runes are durable all the same: hydration folds them instead. */
  readonly failed: (stream: string, error: unknown) => void;
}

interface DueSnapshot {
  readonly snapshot: Snapshot;
  readonly machine: string;
}

/**
 * The engine's snapshots and retention: which snapshots fall due, and saving them in the background.
 *
 * 1. {@link counted} is called for every durable rune of an instance; every `every` runes a snapshot
 *    of its durable state falls due. Only the instance in memory under its stream (`current`)
 *    takes one: an instance that left memory and was hydrated again counts on where it stood.
 * 2. {@link saveSoon} saves the due snapshots one at a time, in the order they fell due, and with
 *    retention `'snapshot'` prunes what each covers right after saving it. One save at a time: a
 *    store is never asked to save an older snapshot of a stream after a newer one.
 * 3. A failed save or prune is reported to `failed` and the next one is saved: nothing is lost,
 *    hydration folds more runes.
 */
export class Snapshots {
  readonly #store: RuneStore;
  readonly #every: number;
  readonly #retention: SnapshotsOptions['retention'];
  readonly #failed: SnapshotsOptions['failed'];
  #due: DueSnapshot[] = [];
  #saving: Promise<void> | undefined;

  constructor(store: RuneStore, options: SnapshotsOptions) {
    this.#store = store;
    this.#every = options.every;
    this.#retention = options.retention;
    this.#failed = options.failed;
  }

  /** Counts one durable rune of `subject` (on the hot path: no allocation unless a snapshot falls due). */
  counted(subject: SnapshotSubject, current: boolean): void {
    if (this.#every > 0 && ++subject.sinceSnapshot >= this.#every && current) {
      subject.sinceSnapshot = 0;
      const { version } = subject.machine;
      const snapshot = { stream: subject.stream, seq: subject.durableSeq, state: subject.durableState };
      this.#due.push({ snapshot: version === 1 ? snapshot : { ...snapshot, v: version }, machine: subject.machine.id });
    }
  }

  /** Whether a snapshot is due and not yet being saved. */
  get due(): boolean {
    return this.#due.length > 0;
  }

  /** The background saving under way, if any: `close` waits for it. */
  get saving(): Promise<void> | undefined {
    return this.#saving;
  }

  /** Saves the due snapshots, one save at a time; resolves once none is due. */
  saveSoon(): Promise<void> {
    if (this.#saving === undefined && this.#due.length > 0) this.#saving = this.#drain();
    return this.#saving ?? Promise.resolve();
  }

  async #drain(): Promise<void> {
    try {
      do {
        const due = this.#due;
        this.#due = [];
        await this.#save(due);
      } while (this.#due.length > 0);
    } finally {
      this.#saving = undefined;
    }
  }

  async #save(due: readonly DueSnapshot[]): Promise<void> {
    for (const { snapshot, machine } of due) {
      const { stream, seq } = snapshot;
      try {
        await this.#store.saveSnapshot(snapshot);
        if (this.#retention(stream, machine) === 'snapshot') await this.#store.prune(stream, seq);
      } catch (error) {
        this.#failed(stream, error);
      }
    }
  }
}
