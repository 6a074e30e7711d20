import { expect, it } from 'vitest';
import {
  ArchiveError,
  type ColdStore,
  type Rune,
  manifestKey,
  readArchivedRunes,
  readManifest,
  readMetricsSnapshot,
  restoreRunes,
  verifyArchive,
  writeArchive,
  writeMetricsSnapshot,
} from '../../src/index.js';

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (body: Uint8Array | undefined) => (body === undefined ? undefined : new TextDecoder().decode(body));

/** `n` runes of `stream` from seq `from`, of machine `m`. */
export const archiveRunes = (stream: string, n: number, from = 1): Rune[] =>
  Array.from({ length: n }, (_, i) => ({
    stream,
    seq: from + i,
    machine: 'm',
    kind: 'ticked',
    event: { type: 'TICK', n: from + i, text: 'é ✓ \u2028' },
    at: 1000 + from + i,
  }));

/** Everything a restore yields, as one list of seqs. */
async function restoredSeqs(cold: ColdStore, ...args: Parameters<typeof restoreRunes> extends [ColdStore, ...infer R] ? R : never): Promise<number[]> {
  const seqs: number[] = [];
  for await (const page of restoreRunes(cold, ...args)) seqs.push(...page.map((r) => r.seq));
  return seqs;
}

/** Flips one byte of the object in the middle, through the store itself. */
async function flipByte(cold: ColdStore, key: string): Promise<void> {
  const body = (await cold.get(key))!;
  body[body.length >> 1]! ^= 0xff;
  await cold.put(key, body);
}

const archiveError = (code: string, message: RegExp | string) => expect.objectContaining({ name: 'ArchiveError', code, message: expect.stringMatching(message) });

/**
 * What every cold store must do, and the archive format over it: the same cases for the folder
 * store and the S3 store. `store()` gives the store of the running test, empty.
 */
export function coldStoreContract(store: () => ColdStore): void {
  it('puts, gets, lists by prefix in key order, overwrites and deletes objects', async () => {
    const cold = store();
    expect(await cold.get('a/b.txt')).toBeUndefined();
    expect(await cold.list('')).toEqual([]);
    await cold.put('a/b.txt', bytes('one'));
    await cold.put('a/b.txt', bytes('two'));
    await cold.put('a/c/d.txt', bytes('deep'));
    await cold.put('ab.txt', bytes('sibling'));
    await cold.put('z', new Uint8Array(0));
    expect(text(await cold.get('a/b.txt'))).toBe('two');
    expect(await cold.get('z')).toEqual(new Uint8Array(0));
    expect(await cold.get('a')).toBeUndefined(); // a prefix of keys is not an object
    expect(await cold.list('')).toEqual(['a/b.txt', 'a/c/d.txt', 'ab.txt', 'z']);
    expect(await cold.list('a/')).toEqual(['a/b.txt', 'a/c/d.txt']);
    expect(await cold.list('a')).toEqual(['a/b.txt', 'a/c/d.txt', 'ab.txt']);
    expect(await cold.list('a/c')).toEqual(['a/c/d.txt']);
    expect(await cold.list('nothing/')).toEqual([]);
    await cold.delete('a/b.txt');
    await cold.delete('a/b.txt'); // a missing object: not an error
    expect(await cold.get('a/b.txt')).toBeUndefined();
    expect(await cold.list('a/')).toEqual(['a/c/d.txt']);
  });

  it.each([
    ['../escape', /starts with `\.`/],
    ['a/../../escape', /starts with `\.`/],
    ['/etc/passwd', /absolute path/],
    ['a//b', /empty part/],
    ['a/', /empty part/],
    ['', /non-empty/],
    ['a\\b', /character other than/],
    ['a b', /character other than/],
    ['a/.hidden', /starts with `\.`/],
    ['a\u0000b', /character other than/],
    ['x'.repeat(256), /longer than 255/],
    [`${'x/'.repeat(600)}x`, /longer than 1024/],
  ])('refuses the key %j with invalid_cold_key, touching nothing', async (key, reason) => {
    const cold = store();
    for (const call of [() => cold.put(key, bytes('x')), () => cold.get(key), () => cold.delete(key)])
      await expect(call()).rejects.toEqual(expect.objectContaining({ name: 'ColdKeyError', code: 'invalid_cold_key', message: expect.stringMatching(reason) }));
    await expect(cold.list('../')).rejects.toMatchObject({ code: 'invalid_cold_key' });
    expect(await cold.list('')).toEqual([]);
  });

  it('round-trips a long stream through several segments: write, list, verify, read ranges, restore', async () => {
    const cold = store();
    const stream = 'conv/c1/agent/a1'; // ids hold `/`: one key part all the same
    const manifest = await writeArchive(cold, { stream, machine: 'm', state: { count: 95 }, runes: archiveRunes(stream, 95), at: 5000, maxSegmentRunes: 20 });
    expect(manifest).toMatchObject({ version: 1, stream, machine: 'm', fromSeq: 1, seq: 95, state: { count: 95 }, at: 5000 });
    expect(manifest.segments.map((s) => [s.fromSeq, s.toSeq])).toEqual([
      [1, 20],
      [21, 40],
      [41, 60],
      [61, 80],
      [81, 95],
    ]);
    expect(await cold.list('streams/')).toEqual([...manifest.segments.map((s) => s.key), manifestKey(stream)]);
    expect(manifest.segments[0]!.key).toBe('streams/conv%2Fc1%2Fagent%2Fa1/000000000001-000000000020.ndjson.gz');
    expect(await readManifest(cold, stream)).toEqual(manifest);
    expect(await readManifest(cold, 'conv/c1/agent/a2')).toBeUndefined();
    expect(await verifyArchive(cold, manifest)).toEqual({ segments: 5, runes: 95, bytes: manifest.segments.reduce((n, s) => n + s.bytes, 0) });
    expect(await readArchivedRunes(cold, manifest, { afterSeq: 38, limit: 5 })).toEqual(archiveRunes(stream, 5, 39));
    expect(await readArchivedRunes(cold, manifest)).toEqual(archiveRunes(stream, 95));
    expect(await readArchivedRunes(cold, manifest, { afterSeq: 95 })).toEqual([]);
    expect(await restoredSeqs(cold, manifest, { afterSeq: 50 })).toEqual(Array.from({ length: 45 }, (_, i) => 51 + i));
  });

  it('only reads the segments a range needs', async () => {
    const cold = store();
    const manifest = await writeArchive(cold, { stream: 's', machine: 'm', state: null, runes: archiveRunes('s', 60), at: 1, maxSegmentRunes: 20 });
    await cold.delete(manifest.segments[0]!.key);
    await cold.delete(manifest.segments[2]!.key);
    expect((await readArchivedRunes(cold, manifest, { afterSeq: 20, limit: 20 })).map((r) => r.seq)).toEqual(Array.from({ length: 20 }, (_, i) => 21 + i));
    await expect(readArchivedRunes(cold, manifest, { afterSeq: 20, limit: 21 })).rejects.toEqual(archiveError('missing_segment', '000000000041-000000000060'));
  });

  it('cuts segments by bytes too, and archives runes pruned before from their first seq', async () => {
    const cold = store();
    const manifest = await writeArchive(cold, { stream: 's', machine: 'm', state: 1, runes: archiveRunes('s', 10, 31), at: 1, maxSegmentBytes: 300 });
    expect(manifest.fromSeq).toBe(31);
    expect(manifest.segments.length).toBeGreaterThan(2);
    expect(await verifyArchive(cold, manifest)).toMatchObject({ runes: 10 });
    expect(await restoredSeqs(cold, manifest)).toEqual(Array.from({ length: 10 }, (_, i) => 31 + i));
  });

  it('a flipped byte is checksum_mismatch naming the segment, and a restore yields nothing', async () => {
    const cold = store();
    const manifest = await writeArchive(cold, { stream: 'conv/c2', machine: 'm', state: null, runes: archiveRunes('conv/c2', 50), at: 1, maxSegmentRunes: 20 });
    const bad = manifest.segments[2]!.key;
    await flipByte(cold, bad);
    const expected = archiveError('checksum_mismatch', `segment "${bad}" does not match its checksum`);
    await expect(verifyArchive(cold, manifest)).rejects.toEqual(expected);
    const yielded: Rune[][] = [];
    await expect(
      (async () => {
        for await (const page of restoreRunes(cold, manifest)) yielded.push(page);
      })(),
    ).rejects.toEqual(expected);
    expect(yielded).toEqual([]); // the first two segments are sound, and still nothing was yielded
    expect(await readArchivedRunes(cold, manifest, { limit: 40 })).toHaveLength(40); // the sound segments stay readable
  });

  it('a missing segment is missing_segment naming it, and a restore yields nothing', async () => {
    const cold = store();
    const manifest = await writeArchive(cold, { stream: 's', machine: 'm', state: null, runes: archiveRunes('s', 30), at: 1, maxSegmentRunes: 10 });
    await cold.delete(manifest.segments[1]!.key);
    await expect(verifyArchive(cold, manifest)).rejects.toEqual(archiveError('missing_segment', `segment "${manifest.segments[1]!.key}" \\(runes 11..20\\)`));
    await expect(restoredSeqs(cold, manifest)).rejects.toMatchObject({ code: 'missing_segment' });
  });

  it('a segment whose checksum matches but whose runes do not is invalid_segment', async () => {
    const cold = store();
    const manifest = await writeArchive(cold, { stream: 's', machine: 'm', state: null, runes: archiveRunes('s', 4), at: 1 });
    const other = await writeArchive(cold, { stream: 't', machine: 'm', state: null, runes: archiveRunes('t', 4), at: 1 });
    // A manifest that points at its stream's key but carries the other stream's bytes and checksum.
    await cold.put(manifest.segments[0]!.key, (await cold.get(other.segments[0]!.key))!);
    const forged = { ...manifest, segments: [{ ...manifest.segments[0]!, sha256: other.segments[0]!.sha256, bytes: other.segments[0]!.bytes }] };
    await expect(verifyArchive(cold, forged)).rejects.toEqual(archiveError('invalid_segment', 'rune 1 is of stream "t"'));
  });

  it.each([
    ['not JSON', '{"version":1,', /not JSON/],
    ['another version', JSON.stringify({ version: 2 }), /version/],
    ['another stream', JSON.stringify({ version: 1, stream: 'other', machine: 'm', fromSeq: 1, seq: 0, state: null, segments: [], at: 1 }), /archive of stream "other"/],
    [
      'a segment outside its folder',
      JSON.stringify({
        version: 1,
        stream: 's',
        machine: 'm',
        fromSeq: 1,
        seq: 1,
        state: null,
        segments: [{ key: 'streams/t/x', fromSeq: 1, toSeq: 1, bytes: 1, sha256: '0'.repeat(64) }],
        at: 1,
      }),
      /outside the stream's archive/,
    ],
    [
      'a gap between segments',
      JSON.stringify({
        version: 1,
        stream: 's',
        machine: 'm',
        fromSeq: 1,
        seq: 3,
        state: null,
        segments: [
          { key: 'streams/s/a', fromSeq: 1, toSeq: 1, bytes: 1, sha256: '0'.repeat(64) },
          { key: 'streams/s/b', fromSeq: 3, toSeq: 3, bytes: 1, sha256: '0'.repeat(64) },
        ],
        at: 1,
      }),
      /expected it to start at 2/,
    ],
  ])('a manifest that is %s is invalid_manifest naming its key', async (_, body, reason) => {
    const cold = store();
    await cold.put(manifestKey('s'), bytes(body));
    await expect(readManifest(cold, 's')).rejects.toEqual(archiveError('invalid_manifest', 'archive manifest "streams/s/manifest.json" is invalid'));
    await expect(readManifest(cold, 's')).rejects.toThrow(reason);
  });

  it('writes metrics snapshots gzipped under metrics/, in time order', async () => {
    const cold = store();
    const late = await writeMetricsSnapshot(cold, { runes_appended_total: 12 }, 120_000);
    const early = await writeMetricsSnapshot(cold, { runes_appended_total: 3 }, 60_000);
    expect(early).toBe('metrics/000000000060000.json.gz');
    expect(await cold.list('metrics/')).toEqual([early, late]);
    expect(await readMetricsSnapshot(cold, late)).toEqual({ runes_appended_total: 12 });
    expect(await readMetricsSnapshot(cold, 'metrics/000000000000001.json.gz')).toBeUndefined();
    await cold.put('metrics/bad.json.gz', bytes('not gzip'));
    await expect(readMetricsSnapshot(cold, 'metrics/bad.json.gz')).rejects.toBeInstanceOf(ArchiveError);
  });
}
