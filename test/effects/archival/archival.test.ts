import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VirtualTimeScheduler, firstValueFrom, take, toArray, type Observable } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine, memoryStore, type Engine, type Rune, type RuneStore } from '../../../src/index.js';
import { archivalEpic, type ArchivalOptions } from '../../../src/effects/archival/archival-epic.js';
import { archiveTarget, restoreTarget } from '../../../src/effects/archival/archival-requests.js';
import type { ColdStore } from '../../../src/streams/archive/cold-store.js';
import { fsColdStore } from '../../../src/streams/archive/fs-cold-store.js';
import { readManifest } from '../../../src/streams/archive/read-archive.js';
import { sqliteStore } from '../../../src/streams/sqlite-store.js';
import { conversationWithTurns } from '../../support/archival-conversation.js';
import { flakyColdStore } from '../../support/flaky-cold-store.js';

const dir = mkdtempSync(join(tmpdir(), 'runestream-archival-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let folders = 0;
const coldFolder = (): string => join(dir, `cold-${++folders}`);

const TURNS = 30;

/** A conversation with an agent and {@link TURNS} turns, closed (sealed) unless `close` is false. */
const conversationIn = (engine: Engine, id: string, close = true): Promise<void> => conversationWithTurns(engine, id, TURNS, close);

/** The first `n` runes of a `runes$`: it replays, then goes live, so it never completes on its own. */
const firstRunes = (runes$: Observable<Rune>, n: number): Promise<Rune[]> => firstValueFrom(runes$.pipe(take(n), toArray()));

const allRunes = async (store: RuneStore, stream: string): Promise<Rune[]> => store.read(stream);

function archivingEngine(store: RuneStore, cold: ColdStore, options: Partial<ArchivalOptions> & { scheduler?: VirtualTimeScheduler } = {}): Engine {
  const { scheduler, ...archival } = options;
  return createEngine({ store, archive: cold, ...(scheduler === undefined ? {} : { scheduler }), epics: [archivalEpic({ store, cold, ...archival })] });
}

describe('archiving a sealed conversation to a folder', () => {
  it('writes every stream of it, verified, prunes the hot runes only then, marks the conversation archived, and serves the archived runes read-only', async () => {
    const store = memoryStore();
    const cold = fsColdStore(coldFolder());
    const engine = archivingEngine(store, cold);
    await conversationIn(engine, 'c1');
    const before = { conv: await allRunes(store, 'conv/c1'), agent: await allRunes(store, 'conv/c1/agent/a1') };

    const outcome = await archiveTarget({ engine, store, cold }, 'conv/c1');
    expect(outcome).toEqual({
      outcome: 'archived',
      target: 'conv/c1',
      run: 'archive/conv/c1',
      streams: [
        { stream: 'conv/c1', fromSeq: 1, seq: before.conv.length, segments: 1 },
        { stream: 'conv/c1/agent/a1', fromSeq: 1, seq: 2, segments: 1 },
      ],
    });
    // The hot log kept only the archive_requested rune the run appended after archiving.
    expect((await allRunes(store, 'conv/c1')).map((rune) => [rune.seq, rune.kind])).toEqual([[before.conv.length + 1, 'archive_requested']]);
    expect(await allRunes(store, 'conv/c1/agent/a1')).toEqual([]);
    expect(await store.head('conv/c1/agent/a1')).toMatchObject({ seq: 2, value: 'idle' });
    expect((await engine.snapshot<{ value: string; turns: number }>('conv/c1'))?.state).toMatchObject({ value: 'archived', turns: TURNS });

    // The run's runes: IDLE -> ARCHIVING -> WRITING_TO_R2 -> COMPLETED -> IDLE.
    expect((await allRunes(store, 'archive/conv/c1')).map((rune) => rune.to)).toEqual(['IDLE', 'ARCHIVING', 'WRITING_TO_R2', 'COMPLETED', 'IDLE']);

    // Read through the engine: the archived runes, then the hot one, with no gap.
    const conv = await firstRunes(engine.runes$('conv/c1'), before.conv.length + 1);
    expect(conv.slice(0, before.conv.length)).toEqual(before.conv);
    expect(conv.map((rune) => rune.seq)).toEqual(Array.from({ length: before.conv.length + 1 }, (_, i) => i + 1));
    expect(await firstRunes(engine.runes$('conv/c1/agent/a1', { afterSeq: 1 }), 1)).toEqual(before.agent.slice(1));

    // Read-only: the conversation is terminal, and what is under it sealed.
    expect(await engine.dispatch('conv/c1', { type: 'first_message' })).toMatchObject({ accepted: false, code: 'terminal_state' });
    expect(await engine.dispatch('conv/c1/agent/a1', { type: 'turn_assigned' })).toMatchObject({ accepted: false, code: 'sealed' });
    await engine.close();
  });
});

/** Lets real I/O (files) make progress between virtual-time steps. */
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 5));

/** Waits (in real time, the archive being on disk) until `check` holds. */
async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await check()) return;
    await settle();
  }
  throw new Error('the condition did not hold within 2 s');
}

/** Runs virtual time up to `at` (and no further: a deadline re-armed later stays pending). */
function advanceTo(scheduler: VirtualTimeScheduler, at: number): void {
  scheduler.maxFrames = at;
  scheduler.flush();
}

describe('an archival run whose writes fail', () => {
  it('fails twice, retries after its backoff on the scheduler (ERROR -> RETRYING -> WRITING_TO_R2), then succeeds; nothing is pruned before', async () => {
    const scheduler = new VirtualTimeScheduler();
    const store = memoryStore();
    const cold = flakyColdStore(fsColdStore(coldFolder()), 0);
    const engine = archivingEngine(store, cold, { scheduler, retryBaseMs: 1000 });
    await conversationIn(engine, 'c2');
    const hot = (await allRunes(store, 'conv/c2')).length;
    cold.failNext(2);
    const outcome = archiveTarget({ engine, store, cold }, 'conv/c2');
    expect(await outcome).toMatchObject({ outcome: 'retrying', attempts: 1, error: expect.stringContaining('connection reset (flaky cold store, failure 1)') });
    expect(await allRunes(store, 'conv/c2')).toHaveLength(hot); // nothing pruned

    const run = 'archive/conv/c2';
    const valueOf = async (): Promise<string | undefined> => (await store.head(run))?.value;
    advanceTo(scheduler, 999);
    await settle();
    expect(await valueOf()).toBe('ERROR'); // the backoff is not over
    advanceTo(scheduler, 1000);
    await until(async () => (await store.head(run))!.seq === 7); // ERROR again, after the second failure
    expect(await valueOf()).toBe('ERROR');
    advanceTo(scheduler, 2999);
    await settle();
    expect(await valueOf()).toBe('ERROR'); // twice as long this time
    advanceTo(scheduler, 3000);
    await until(async () => (await valueOf()) === 'IDLE');

    const runes = await allRunes(store, run);
    expect(runes.map((rune) => [rune.to, rune.at])).toEqual([
      ['IDLE', 0],
      ['ARCHIVING', 0],
      ['WRITING_TO_R2', 0],
      ['ERROR', 0],
      ['RETRYING', 1000],
      ['WRITING_TO_R2', 1000],
      ['ERROR', 1000],
      ['RETRYING', 3000],
      ['WRITING_TO_R2', 3000],
      ['COMPLETED', 3000],
      ['IDLE', 3000],
    ]);
    expect(runes[6]!.event).toMatchObject({ type: 'write_failed', error: expect.stringContaining('failure 2') });
    expect(cold.failed).toBe(2);
    expect((await readManifest(cold, 'conv/c2'))?.seq).toBe(hot);
    expect((await engine.snapshot<{ value: string }>('conv/c2'))?.state.value).toBe('archived');
    await engine.close();
  });
});

describe('bad input', () => {
  it('refuses to archive a conversation that is not sealed (not_sealed), or a stream that does not exist (unknown_stream); nothing is written', async () => {
    const store = memoryStore();
    const cold = fsColdStore(coldFolder());
    const engine = archivingEngine(store, cold);
    await conversationIn(engine, 'open', false);
    await expect(archiveTarget({ engine, store, cold }, 'conv/open')).rejects.toMatchObject({
      code: 'not_sealed',
      message: 'cannot archive "conv/open": conversation "conv/open" is active, not sealed: only a conversation in closed or archived can be archived',
    });
    await expect(archiveTarget({ engine, store, cold }, 'conv/open/agent/a1')).rejects.toMatchObject({ code: 'not_sealed' });
    await expect(archiveTarget({ engine, store, cold }, 'conv/none')).rejects.toMatchObject({ code: 'unknown_stream' });
    expect(await cold.list('')).toEqual([]);
    expect(await store.head('archive/conv/open')).toBeUndefined();
    await engine.close();
  });
});

describe('restoring an archived conversation into the hot log', () => {
  it('puts every archived rune back (SQLite), once; a second restore puts back nothing', async () => {
    const store = sqliteStore(join(dir, 'restore.db'));
    const cold = fsColdStore(coldFolder());
    const engine = archivingEngine(store, cold);
    await conversationIn(engine, 'c3');
    const before = await allRunes(store, 'conv/c3');
    await archiveTarget({ engine, store, cold }, 'conv/c3');
    expect(await allRunes(store, 'conv/c3')).toHaveLength(1);

    expect(await restoreTarget({ engine, store, cold }, 'conv/c3')).toEqual({
      target: 'conv/c3',
      streams: [
        { stream: 'conv/c3', runes: before.length },
        { stream: 'conv/c3/agent/a1', runes: 2 },
      ],
    });
    const after = await allRunes(store, 'conv/c3');
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.map((rune) => rune.seq)).toEqual(Array.from({ length: before.length + 1 }, (_, i) => i + 1));
    expect(await restoreTarget({ engine, store, cold }, 'conv/c3')).toMatchObject({ streams: [{ runes: 0 }, { runes: 0 }] });
    await engine.close();
  });

  it('refuses a restore whose segment fails its checksum (a flipped byte), naming the segment, and writes nothing', async () => {
    const store = memoryStore();
    const folder = coldFolder();
    const cold = fsColdStore(folder);
    const engine = archivingEngine(store, cold);
    await conversationIn(engine, 'c4');
    await archiveTarget({ engine, store, cold }, 'conv/c4');
    const manifest = (await readManifest(cold, 'conv/c4/agent/a1'))!;
    const segment = manifest.segments[0]!;
    const bytes = (await cold.get(segment.key))!;
    bytes[bytes.length - 5]! ^= 0xff;
    await cold.put(segment.key, bytes);

    await expect(restoreTarget({ engine, store, cold }, 'conv/c4')).rejects.toMatchObject({ code: 'checksum_mismatch', message: expect.stringContaining(segment.key) });
    // Nothing written, not even the conversation stream's runes, whose archive is sound.
    expect(await allRunes(store, 'conv/c4')).toHaveLength(1);
    expect(await allRunes(store, 'conv/c4/agent/a1')).toEqual([]);
    await engine.close();
  });
});

describe('retention, enforced by the archival epic on schedule', () => {
  it('starts only the runs this process owns (several processes sweep one log)', async () => {
    const HOUR = 3_600_000;
    const scheduler = new VirtualTimeScheduler();
    const store = memoryStore();
    const cold = fsColdStore(coldFolder());
    const retention = [{ machine: 'circuit-breaker', keep: 'since-snapshot' as const }];
    // This process owns the run of provider/mine; another process owns that of provider/theirs.
    const ownership = { owns: (stream: string) => !stream.includes('theirs') };
    const engine = createEngine({ store, scheduler, archive: cold, snapshotEvery: 5, ownership, epics: [archivalEpic({ store, cold, retentionEveryMs: HOUR, retention })] });
    for (const stream of ['provider/mine', 'provider/theirs']) {
      await engine.spawn(stream, 'circuit-breaker', { failureThreshold: 3, successThreshold: 1, openTimeoutMs: 1000 });
      for (let i = 0; i < 11; i++) await engine.dispatch(stream, { type: 'success' });
    }
    advanceTo(scheduler, HOUR);
    await until(async () => {
      const run = await store.head('archive/provider/mine');
      return run !== undefined && run.seq > 1 && run.value === 'IDLE';
    });
    expect((await allRunes(store, 'provider/mine')).map((rune) => rune.seq)).toEqual([11, 12]);
    expect(await store.head('archive/provider/theirs')).toBeUndefined();
    expect(await allRunes(store, 'provider/theirs')).toHaveLength(12);
    await engine.close();
  });

  it('archives, then prunes, what each policy does not keep: a stream idle past its window whole, a stream up to its snapshot; the rest stays, and all of it stays readable', async () => {
    const HOUR = 3_600_000;
    const scheduler = new VirtualTimeScheduler();
    const store = memoryStore();
    const cold = fsColdStore(coldFolder());
    const retention = [
      { prefix: 'conv/', keep: { days: 1 } },
      { machine: 'circuit-breaker', keep: 'since-snapshot' as const },
    ];
    const engine = createEngine({ store, scheduler, archive: cold, snapshotEvery: 5, epics: [archivalEpic({ store, cold, retentionEveryMs: HOUR, retention })] });
    await conversationIn(engine, 'old', false); // active; its last rune at 0
    await engine.spawn('provider/p', 'circuit-breaker', { failureThreshold: 3, successThreshold: 1, openTimeoutMs: 1000 });
    for (let i = 0; i < 11; i++) await engine.dispatch('provider/p', { type: 'success' }); // 12 runes, a snapshot at 10
    await engine.spawn('kept', 'chat-actor'); // no policy: kept whole
    const old = await allRunes(store, 'conv/old');
    const breaker = await allRunes(store, 'provider/p');
    const runEnded = (run: string) => async (): Promise<boolean> => {
      const head = await store.head(run);
      return head !== undefined && head.seq > 1 && head.value === 'IDLE';
    };

    // The first pass, at 1 h: the breaker's runes up to its snapshot go; the conversation is inside its day.
    advanceTo(scheduler, HOUR);
    await until(runEnded('archive/provider/p'));
    expect((await allRunes(store, 'provider/p')).map((rune) => rune.seq)).toEqual([11, 12]);
    expect(await allRunes(store, 'conv/old')).toEqual(old);

    // At 36 h a new conversation; at the pass of 37 h the old one (idle for 37 h) goes, the new one (1 h old) stays.
    advanceTo(scheduler, 36 * HOUR);
    await settle();
    await conversationIn(engine, 'new', false);
    advanceTo(scheduler, 37 * HOUR);
    await until(runEnded('archive/conv/old'));
    await until(runEnded('archive/conv/old/agent/a1'));
    expect(await allRunes(store, 'conv/old')).toEqual([]);
    expect(await allRunes(store, 'conv/old/agent/a1')).toEqual([]);
    expect(await store.head('archive/conv/new')).toBeUndefined();
    expect((await allRunes(store, 'conv/new')).length).toBeGreaterThan(0);
    expect(await allRunes(store, 'kept')).toHaveLength(1);
    expect((await readManifest(cold, 'conv/old'))?.seq).toBe(old.length);

    // Nothing lost: every rune is read back, from the archive then the hot log; the active conversation goes on.
    expect(await firstRunes(engine.runes$('conv/old'), old.length)).toEqual(old);
    expect(await firstRunes(engine.runes$('provider/p'), breaker.length)).toEqual(breaker);
    expect(await engine.dispatch('conv/old', { type: 'new_turn' })).toMatchObject({ accepted: true, rune: { seq: old.length + 1 } });
    expect((await engine.snapshot<{ value: string }>('conv/old'))?.state.value).toBe('active');
    await engine.close();
  });
});
