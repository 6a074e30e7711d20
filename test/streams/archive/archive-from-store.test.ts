import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type ColdStore, type RuneStore, fsColdStore, readArchivedRunes, restoreRunes, storeRunePages, verifyArchive, writeArchive } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { runesOf } from '../../../src/store-kit.js';

describe('archiving a stream of a SQLite store, and restoring it', () => {
  let dir: string;
  let store: RuneStore;
  let cold: ColdStore;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'runestream-archive-'));
    store = sqliteStore(join(dir, 'log.db'));
    cold = fsColdStore(join(dir, 'cold'));
  });
  afterEach(async () => {
    await store.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it('pipes pages of store.read into segments, and restores every rune into an empty store', async () => {
    const stream = 'conv/c1/chat';
    await store.append(runesOf(stream, 1, 1000));
    await store.append(runesOf(stream, 1001, 250));
    const reads: [number, number][] = [];
    const counting: RuneStore = { ...store, read: (s, afterSeq = 0, limit = Infinity) => (reads.push([afterSeq, limit]), store.read(s, afterSeq, limit)) };
    const head = (await store.head(stream))!;

    const manifest = await writeArchive(cold, {
      stream,
      machine: head.machine,
      state: { folded: true },
      at: head.at,
      runes: storeRunePages(counting, stream, { pageSize: 400, throughSeq: head.seq }),
      maxSegmentRunes: 500,
    });
    expect(reads).toEqual([
      [0, 400],
      [400, 400],
      [800, 400],
      [1200, 50],
    ]); // a page at a time, never past throughSeq
    expect(manifest.segments.map((s) => s.toSeq)).toEqual([500, 1000, 1250]);
    expect(await verifyArchive(cold, manifest)).toMatchObject({ runes: 1250 });
    expect(await readArchivedRunes(cold, manifest, { afterSeq: 998, limit: 4 })).toEqual(await store.read(stream, 998, 4));

    const restored = sqliteStore(join(dir, 'restored.db'));
    for await (const page of restoreRunes(cold, manifest)) await restored.append(page);
    expect(await restored.read(stream)).toEqual(await store.read(stream));
    await restored.close();
  });

  it('archives only the runes after afterSeq, and an empty stream to a manifest without segments', async () => {
    await store.append(runesOf('s', 1, 30));
    const manifest = await writeArchive(cold, { stream: 's', machine: 'counter', state: 1, at: 1, runes: storeRunePages(store, 's', { afterSeq: 20, pageSize: 4 }) });
    expect([manifest.fromSeq, manifest.seq]).toEqual([21, 30]);
    const empty = await writeArchive(cold, { stream: 'e', machine: 'counter', state: null, at: 1, runes: storeRunePages(store, 'e'), afterSeq: 7 });
    expect(empty).toMatchObject({ fromSeq: 8, seq: 7, segments: [] });
    expect(await verifyArchive(cold, empty)).toEqual({ segments: 0, runes: 0, bytes: 0 });
  });

  it.each([
    ['a gap', [...runesOf('s', 1, 3), ...runesOf('s', 5, 1)], undefined, /expected rune 4, got 5/],
    ['another stream', [...runesOf('s', 1, 2), ...runesOf('t', 3, 1)], undefined, /rune 3 is of stream "t"/],
    ['another machine', runesOf('s', 1, 2).map((r) => ({ ...r, machine: 'other' })), undefined, /machine "other"/],
    ['a first rune other than afterSeq + 1', runesOf('s', 3, 2), 0, /expected rune 1, got 3/],
  ])('refuses runes with %s and writes no manifest', async (_, runes, afterSeq, message) => {
    await expect(writeArchive(cold, { stream: 's', machine: 'counter', state: null, at: 1, runes, afterSeq })).rejects.toThrow(message);
    expect(await cold.list('streams/s/manifest')).toEqual([]);
  });
});
