import { Observable, concatMap, from } from 'rxjs';
import type { AnyMachine } from '../../reducers/machine.js';
import type { Rune } from '../../reducers/rune.js';
import type { CommitQueue } from '../commit-queue.js';
import type { Homes } from './homes.js';
import { newerVersion, type Instance } from './instance.js';
import { replayThenLive } from '../replay-then-live.js';
import type { Snapshot } from '../store.js';
import { StreamReadError } from '../stream-read-error.js';
import type { Outlets } from './outlets.js';

/** Options of `runes$(stream, options)`. */
export interface RunesOptions {
  /** Replay the stored runes with `seq > afterSeq` first. Default: 0 (the whole stream). */
  afterSeq?: number;
}

/** Runes read per page of a stored replay (`runes$` after a seq, an epic's `read`). */
const READ_PAGE = 1000;

/** What an engine's reads are made of. */
export interface ReadsOf {
  readonly homes: Homes;
  readonly commits: CommitQueue<Instance>;
  readonly outlets: Outlets;
  /** A page of a stream's stored runes (through its archive, when the engine has one). */
  readonly read: (stream: string, afterSeq: number, limit: number) => Promise<Rune[]>;
  /** Whether `read` goes through an archive, which may end a page short before the stream's end. */
  readonly archived: boolean;
  /** The machines the engine hosts: a rune one of them reads must not be newer than it. */
  readonly machines: Readonly<Record<string, AnyMachine>>;
}

/** An engine's reads: `state$`, `snapshot`, `runes$`, and the stored runes an epic reads. */
export interface EngineReads {
  state$<S>(stream: string): Observable<S>;
  snapshot<S>(stream: string): Promise<Snapshot<S> | undefined>;
  runes$(stream: string, options?: RunesOptions): Observable<Rune>;
  /** A stream's stored runes after `afterSeq`, each page's runes emitted at once. */
  stored(stream: string, afterSeq: number): Observable<Rune>;
}

/**
 * The reads of an engine's streams: durable states and runes only, never a rune a newer version of
 * its machine wrote (`newer_version`). `state$` subscribes to the
 * stream's outlet before it loads the stream, so no state published meanwhile is missed, and
 * emits each durable state once, in seq order; `runes$` replays the stored runes, then the live
 * ones, without gap or duplicate.
 */
export function engineReads({ homes, commits, outlets, read: readStored, archived, machines }: ReadsOf): EngineReads {
  /** A page of stored runes, refused if one of them was written by a newer version of its machine than this engine hosts. */
  const read = async (stream: string, afterSeq: number, limit: number): Promise<Rune[]> => {
    const page = await readStored(stream, afterSeq, limit);
    for (const rune of page) {
      const machine = rune.v === undefined ? undefined : machines[rune.machine];
      const newer = machine === undefined ? undefined : newerVersion(rune, machine);
      if (newer !== undefined) throw newer;
    }
    return page;
  };

  const state$ = <S>(stream: string): Observable<S> =>
    new Observable<S>((subscriber) => {
      // The seq of the last state emitted: each durable state is emitted once, in order.
      let seen = 0;
      const emit = (seq: number, state: unknown): void => {
        if (seq <= seen) return;
        seen = seq;
        subscriber.next(state as S);
      };
      const stop = outlets.states.add(stream, {
        next: (instance) => emit(instance.durableSeq, instance.durableState),
        complete: () => subscriber.complete(),
      });
      const current = (loaded: Instance | undefined): void => {
        if (loaded === undefined) subscriber.error(new StreamReadError('unknown_stream', `unknown stream "${stream}"`));
        else emit(loaded.durableSeq, loaded.durableState); // durableSeq 0: a spawn not yet durable
      };
      // In memory, the current state comes at once: a dispatch right after subscribing follows it.
      const loaded = homes.load(stream);
      if (loaded instanceof Promise) loaded.then(current, (error: unknown) => subscriber.error(error));
      else current(loaded);
      return stop;
    });

  const snapshot = async <S>(stream: string): Promise<Snapshot<S> | undefined> => {
    const instance = await homes.load(stream);
    // durableSeq 0: its spawn is not durable yet; wait for the batch that carries it.
    while (instance !== undefined && instance.durableSeq === 0 && commits.flushing !== undefined) await commits.flushing;
    if (instance === undefined || instance.durableSeq === 0) return undefined;
    return { stream, seq: instance.durableSeq, state: instance.durableState as S };
  };

  const runes$ = (stream: string, options: RunesOptions = {}): Observable<Rune> =>
    replayThenLive({
      stream,
      afterSeq: options.afterSeq ?? 0,
      read: (afterSeq, limit) => read(stream, afterSeq, limit),
      live$: new Observable<Rune>((subscriber) => outlets.runes.add(stream, subscriber)),
    });

  /**
   * A stream's stored runes after `afterSeq`, in pages of {@link READ_PAGE}. A store gives a short
   * page only at the stream's end, so a short page ends the read without asking again (a read of
   * a few new runes, as a model call's turn history makes, is one query); an archive may end a
   * page at a segment's end, so through one the read goes on until a page is empty.
   */
  async function* storedPages(stream: string, afterSeq: number): AsyncGenerator<readonly Rune[]> {
    for (let after = afterSeq; ; ) {
      const page = await read(stream, after, READ_PAGE);
      if (page.length > 0) yield page;
      if (page.length === 0 || (page.length < READ_PAGE && !archived)) return;
      after = page[page.length - 1]!.seq;
    }
  }
  // A page's runes are emitted at once, one after another: an async generator's rune at a time
  // costs a promise per rune, and a model call reads its whole turn stream.
  const stored = (stream: string, afterSeq: number): Observable<Rune> => from(storedPages(stream, afterSeq)).pipe(concatMap((page) => page));

  return { state$, snapshot, runes$, stored };
}
