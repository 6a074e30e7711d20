import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { filter, firstValueFrom, take, toArray } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { archivalEpic } from '../../../src/effects/archival/archival-epic.js';
import { createEngine } from '../../../src/index.js';
import { fsColdStore } from '../../../src/streams/archive/fs-cold-store.js';
import { readArchivedRunes, readManifest } from '../../../src/streams/archive/read-archive.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { runAndKill } from '../../support/kill-worker.js';

const dir = mkdtempSync(join(tmpdir(), 'runestream-archival-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const workerScript = fileURLToPath(new URL('../../fixtures/archival-crash-worker.ts', import.meta.url));
const TURNS = 40;

describe('kill -9 of an archival run between its write and its prune', () => {
  it('resumes on restart from the log: prunes, marks the conversation archived, resets; nothing lost, nothing duplicated', async () => {
    const path = join(dir, 'crash.db');
    const folder = join(dir, 'cold');
    const { line, signal } = await runAndKill(workerScript, [path, folder, String(TURNS)]);
    expect([line, signal]).toEqual(['pruning conv/c1', 'SIGKILL']);

    // As the process died: archived and verified, nothing pruned yet.
    const store = sqliteStore(path);
    const cold = fsColdStore(folder);
    const hot = await store.read('conv/c1');
    const count = 4 + 2 * TURNS; // spawn, first_message, the turns, close_requested, cleanup_complete
    expect(hot.map((rune) => rune.seq)).toEqual(Array.from({ length: count }, (_, i) => i + 1));
    expect((await store.head('archive/conv/c1'))?.value).toBe('COMPLETED');
    const manifest = (await readManifest(cold, 'conv/c1'))!;
    expect(await readArchivedRunes(cold, manifest)).toEqual(hot);

    const engine = createEngine({ store, archive: cold, epics: [archivalEpic({ store, cold })] });
    const archived = await firstValueFrom(engine.runes$('archive/conv/c1', { afterSeq: 4 }).pipe(filter((rune) => rune.to === 'IDLE')));
    expect(archived.event).toEqual({ type: 'reset' });
    expect((await engine.snapshot<{ value: string; turns: number }>('conv/c1'))?.state).toMatchObject({ value: 'archived', turns: TURNS });
    expect(await store.read('conv/c1')).toEqual([expect.objectContaining({ seq: count + 1, kind: 'archive_requested' })]);
    expect(await store.read('conv/c1/agent/a1')).toEqual([]);

    // Every rune once, in order: the archived ones, then the one appended after.
    const all = await firstValueFrom(engine.runes$('conv/c1').pipe(take(count + 1), toArray()));
    expect(all.slice(0, count)).toEqual(hot);
    expect(all.map((rune) => rune.seq)).toEqual(Array.from({ length: count + 1 }, (_, i) => i + 1));
    expect(await cold.list('')).toHaveLength(4); // per stream: one segment and its manifest
    await engine.close();
  });
});
