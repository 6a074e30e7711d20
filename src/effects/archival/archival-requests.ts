import { filter, firstValueFrom, timeout } from 'rxjs';
import { archival } from '../../reducers/archival/machine.js';
import type { AnyMachine } from '../../reducers/machine.js';
import { ArchiveError, type ArchiveErrorCode, type ColdStore } from '../../streams/archive/cold-store.js';
import { readManifest } from '../../streams/archive/read-archive.js';
import type { Engine } from '../../streams/engine.js';
import { StoreError, type RuneStore } from '../../streams/store.js';
import { archivalStream } from './archival-streams.js';
import { notSealed, restoreStreams, streamsUnder, type RestoredStream } from './archive-steps.js';

/**
 * Stable codes of a refused archive or restore request:
 * - `unknown_stream`: no stream of that id.
 * - `not_sealed`: the target is not sealed (a conversation not closed): archiving it whole would
 *   archive a log that still grows. Close it first.
 * - `archive_running`: a run of that target is under way (not IDLE); its outcome comes from it.
 * - `timeout`: the run did not end within the wait; it goes on in the background.
 * - `invalid_restore`: the store cannot take the runes back (see `RuneStore.restore`).
 * - the archive's own codes (`checksum_mismatch` naming the segment, `missing_segment`,
 *   `not_archived`, `cold_store_failed`, ...).
 */
export type ArchivalRequestCode = 'unknown_stream' | 'not_sealed' | 'archive_running' | 'timeout' | 'invalid_restore' | ArchiveErrorCode;

/** An archive or restore request that was refused or failed; nothing was pruned or written. */
export class ArchivalRequestError extends Error {
  override readonly name = 'ArchivalRequestError';
  constructor(
    readonly code: ArchivalRequestCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** What the archival requests work on: the engine running the archival epic, its store and cold store. */
export interface ArchivalHost {
  readonly engine: Engine;
  readonly store: RuneStore;
  readonly cold: ColdStore;
  /** Default: the engine's machines. */
  readonly machines?: Readonly<Record<string, AnyMachine>>;
}

/** One archived stream, as its manifest says. */
export interface ArchivedStream {
  readonly stream: string;
  readonly fromSeq: number;
  readonly seq: number;
  readonly segments: number;
}

/** How an archive request ended: archived (and pruned), or failed and retrying with backoff. */
export type ArchiveOutcome =
  | { readonly outcome: 'archived'; readonly target: string; readonly run: string; readonly streams: readonly ArchivedStream[] }
  | { readonly outcome: 'retrying'; readonly target: string; readonly run: string; readonly attempts: number; readonly error: string };

/**
 * Archives `target` now (a sealed conversation and every stream under it, or any sealed stream):
 * starts its archival run `archive/<target>` (spawned on first use) and resolves when the run is
 * back to IDLE (archived, hot runes pruned) or has failed a write (then it retries on its own).
 * Refused with an {@link ArchivalRequestError}: `unknown_stream`, `not_sealed`, `archive_running`;
 * `timeout` after `timeoutMs` (default 60,000; the run goes on).
 */
export async function archiveTarget(host: ArchivalHost, target: string, options: { readonly timeoutMs?: number } = {}): Promise<ArchiveOutcome> {
  const { engine, store, machines = engine.machines } = host;
  const head = await store.head(target);
  if (head === undefined) throw new ArchivalRequestError('unknown_stream', `unknown stream "${target}"`);
  const why = await notSealed(store, machines, head);
  if (why !== undefined) throw new ArchivalRequestError('not_sealed', `cannot archive "${target}": ${why}`);
  const run = archivalStream(target);
  const spawned = await engine.spawn(run, archival.id);
  if (!spawned.accepted && spawned.code !== 'stream_exists') throw new ArchivalRequestError('archive_running', `cannot start the run "${run}": ${spawned.reason}`);
  const started = await engine.dispatch(run, { type: 'start' });
  if (!started.accepted) throw new ArchivalRequestError('archive_running', `the run "${run}" is under way: ${started.reason}`);
  const ended = await firstValueFrom(
    engine.runes$(run, { afterSeq: started.rune.seq }).pipe(
      filter((rune) => rune.to === 'IDLE' || rune.to === 'ERROR'),
      timeout({
        first: options.timeoutMs ?? 60_000,
        with: () => Promise.reject(new ArchivalRequestError('timeout', `the run "${run}" did not end within ${options.timeoutMs ?? 60_000} ms; it goes on`)),
      }),
    ),
  );
  if (ended.to === 'ERROR') {
    const state = (await engine.snapshot<{ attempts: number; error?: string }>(run))?.state;
    return { outcome: 'retrying', target, run, attempts: state?.attempts ?? 0, error: state?.error ?? 'the write failed' };
  }
  const streams: ArchivedStream[] = [];
  for (const each of await streamsUnder(store, target)) {
    const manifest = await readManifest(host.cold, each.stream);
    if (manifest !== undefined) streams.push({ stream: each.stream, fromSeq: manifest.fromSeq, seq: manifest.seq, segments: manifest.segments.length });
  }
  return { outcome: 'archived', target, run, streams };
}

/**
 * Puts the archived runes of `target` and of every stream under it back in the hot log. Every
 * archive is verified before anything is written: a segment whose checksum fails refuses the whole
 * restore with `checksum_mismatch`, naming the segment, and writes nothing.
 */
export async function restoreTarget(host: ArchivalHost, target: string): Promise<{ readonly target: string; readonly streams: readonly RestoredStream[] }> {
  const head = await host.store.head(target);
  if (head === undefined) throw new ArchivalRequestError('unknown_stream', `unknown stream "${target}"`);
  try {
    return { target, streams: await restoreStreams(host.store, host.cold, await streamsUnder(host.store, target)) };
  } catch (error) {
    if (error instanceof ArchiveError) throw new ArchivalRequestError(error.code, error.message, { cause: error });
    if (error instanceof StoreError && error.code === 'invalid_restore') throw new ArchivalRequestError('invalid_restore', error.message, { cause: error });
    throw error;
  }
}
