import type { AnyMachine } from '../../reducers/machine.js';
import { ArchiveError, type ArchiveManifest, type ColdStore } from '../../streams/archive/cold-store.js';
import { readArchivedRunes, readManifest } from '../../streams/archive/read-archive.js';
import { restoreRunes } from '../../streams/archive/restore-runes.js';
import { storeRunePages } from '../../streams/archive/store-rune-pages.js';
import { verifyArchive } from '../../streams/archive/verify-archive.js';
import { writeArchive } from '../../streams/archive/write-archive.js';
import type { Rune } from '../../reducers/rune.js';
import { StoreError, type RuneStore, type Snapshot, type StreamHead } from '../../streams/store.js';

/**
 * The steps of an archival run, each idempotent, so that a run cut anywhere (a crash, kill -9)
 * is simply done again on restart: nothing lost, nothing duplicated.
 */

/** The streams a run of `target` moves: the target and every stream under it (`<target>/...`), in id order. */
export async function streamsUnder(store: RuneStore, target: string): Promise<StreamHead[]> {
  const heads: StreamHead[] = [];
  for await (const head of store.heads({ prefix: target })) if (head.stream === target || head.stream.startsWith(`${target}/`)) heads.push(head);
  return heads;
}

/**
 * Why `target` may not be archived whole, or `undefined` when it may: it is sealed (a closed or
 * archived conversation, or a stream under one), or its machine is in a final state.
 */
export async function notSealed(store: RuneStore, machines: Readonly<Record<string, AnyMachine>>, head: StreamHead): Promise<string | undefined> {
  const sealing = (h: StreamHead): boolean => h.value !== undefined && (Object.hasOwn(machines, h.machine) ? (machines[h.machine]!.seals ?? []) : []).includes(h.value);
  if (sealing(head)) return undefined;
  const machine = Object.hasOwn(machines, head.machine) ? machines[head.machine] : undefined;
  if (head.value !== undefined && machine?.terminal.includes(head.value) === true) return undefined;
  for (let i = head.stream.indexOf('/'); i > 0; i = head.stream.indexOf('/', i + 1)) {
    const ancestor = await store.head(head.stream.slice(0, i));
    if (ancestor !== undefined && sealing(ancestor)) return undefined;
  }
  const seals = machine?.seals;
  return seals !== undefined && seals.length > 0
    ? `${head.machine} "${head.stream}" is ${head.value ?? 'not in a named state'}, not sealed: only a ${head.machine} in ${seals.join(' or ')} can be archived`
    : `stream "${head.stream}" is not sealed: only a stream under a closed conversation, or in a final state of its machine, can be archived`;
}

/** An archive's runes after `afterSeq`, a page at a time. */
async function* archivedPages(cold: ColdStore, manifest: ArchiveManifest, afterSeq: number): AsyncGenerator<Rune[]> {
  for (let after = afterSeq; after < manifest.seq; ) {
    const page = await readArchivedRunes(cold, manifest, { afterSeq: after, limit: 1000 });
    if (page.length === 0) return;
    yield page;
    after = page[page.length - 1]!.seq;
  }
}

/**
 * Writes the archive of `head.stream` through `cut` (its seq and the state after it), reads it
 * back and verifies it, and resolves to its manifest. An earlier archive of the stream is
 * extended: its runes, then the hot runes after it, make the new one (segments of the same range
 * are overwritten with the same runes, so a retried write is safe). An archive that already
 * holds `cut` is only verified.
 */
export async function archiveStream(store: RuneStore, cold: ColdStore, head: StreamHead, cut: Snapshot, at: number): Promise<ArchiveManifest> {
  const { stream } = head;
  const previous = await readManifest(cold, stream);
  if (previous !== undefined && previous.seq >= cut.seq) {
    await verifyArchive(cold, previous);
    return previous;
  }
  async function* runes(): AsyncGenerator<Rune[]> {
    if (previous !== undefined) yield* archivedPages(cold, previous, previous.fromSeq - 1);
    yield* storeRunePages(store, stream, { afterSeq: previous?.seq ?? 0, throughSeq: cut.seq });
  }
  const manifest = await writeArchive(cold, { stream, machine: head.machine, state: cut.state, runes: runes(), at });
  await verifyArchive(cold, manifest);
  return manifest;
}

/**
 * Prunes the hot runes an archive holds: saves a snapshot at its seq (its state), then prunes
 * through it. The stream keeps its head and its snapshot. Done again, it prunes nothing more.
 */
export async function pruneArchived(store: RuneStore, manifest: ArchiveManifest): Promise<number> {
  await store.saveSnapshot({ stream: manifest.stream, seq: manifest.seq, state: manifest.state });
  return store.prune(manifest.stream, manifest.seq);
}

/** What {@link restoreStreams} put back, per stream. */
export interface RestoredStream {
  readonly stream: string;
  readonly runes: number;
}

/**
 * Puts the archived runes of `streams` that are no longer in the hot log back in it. Every
 * archive is read and verified first (a segment whose checksum fails throws an `ArchiveError`
 * naming it), so a bad archive writes nothing; then each stream's runes go back in one
 * transaction (`RuneStore.restore`). A stream whose runes are all in the hot log restores none.
 */
export async function restoreStreams(store: RuneStore, cold: ColdStore, streams: readonly StreamHead[]): Promise<RestoredStream[]> {
  if (store.restore === undefined) throw new StoreError('invalid_restore', 'this store cannot restore pruned runes (it has no restore method)');
  const due: Rune[][] = [];
  for (const head of streams) {
    const manifest = await readManifest(cold, head.stream);
    const oldest = (await store.read(head.stream, 0, 1))[0]?.seq ?? head.seq + 1;
    const runes: Rune[] = [];
    if (manifest === undefined) {
      // The target itself must have an archive to restore from; a stream under it may have none (nothing of it was pruned).
      if (head === streams[0]) throw new ArchiveError('not_archived', `stream "${head.stream}" has no archive in the cold store`);
    } else {
      for await (const page of restoreRunes(cold, manifest)) for (const rune of page) if (rune.seq < oldest) runes.push(rune);
    }
    due.push(runes);
  }
  const restored: RestoredStream[] = [];
  for (const [i, runes] of due.entries()) restored.push({ stream: streams[i]!.stream, runes: await store.restore(runes) });
  return restored;
}
