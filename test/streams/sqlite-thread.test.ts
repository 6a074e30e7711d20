import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createEngine } from '../../src/streams/engine.js';
import { sqliteStore } from '../../src/streams/sqlite-store.js';
import { threadedSqliteStore } from '../../src/streams/sqlite-thread/client.js';
import { StoreConflictError, StoreError, type RuneStore } from '../../src/streams/store.js';
import { runeOf, runesOf, storeContract } from '../../src/store-kit.js';

let dir: string;
let files = 0;
const stores: RuneStore[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'runestream-sqlite-thread-'));
});
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const freshPath = (): string => join(dir, `store-${++files}.db`);
const openThreaded = (path = freshPath()): RuneStore => {
  const store = sqliteStore(path, { thread: true });
  stores.push(store);
  return store;
};

storeContract('sqliteStore in its own thread', () => openThreaded(), { describe, it, expect }, { restore: true });
// As the simulation runs it: each answer waited for blocking, so a call settles at once.
storeContract(
  'sqliteStore in its own thread, its answers waited for blocking',
  () => {
    const store = threadedSqliteStore(freshPath(), {}, 'blocking');
    stores.push(store);
    return store;
  },
  { describe, it, expect },
  { restore: true },
);

describe('sqliteStore({ thread: true })', () => {
  it('writes the same file the in-thread store reads, and reads what it wrote', async () => {
    const path = freshPath();
    const threaded = sqliteStore(path, { thread: true });
    await threaded.append(runesOf('a', 1, 3));
    await threaded.close();
    const inThread = sqliteStore(path);
    expect(await inThread.read('a')).toEqual(runesOf('a', 1, 3));
    await inThread.append(runesOf('a', 4, 1));
    await inThread.close();
    const again = openThreaded(path);
    expect(await again.read('a')).toEqual(runesOf('a', 1, 4));
    expect(await again.head('a')).toMatchObject({ seq: 4 });
  });

  it('refuses at open as the in-thread store does: synchronously, with the same code and message', () => {
    const path = freshPath();
    writeFileSync(path, 'not a database, but long enough to have a header that is not SQLite format 3 '.repeat(3));
    let inThread: unknown;
    try {
      sqliteStore(path);
    } catch (error) {
      inThread = error;
    }
    expect(() => sqliteStore(path, { thread: true })).toThrow(inThread as Error);
    expect(inThread).toBeInstanceOf(StoreError);
  });

  it('refuses a second writer on an open file with `locked`, its cause the SQLite code', () => {
    const path = freshPath();
    openThreaded(path);
    let error: unknown;
    try {
      sqliteStore(path, { thread: true, busyTimeoutMs: 0 });
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(StoreError);
    expect(error).toMatchObject({ code: 'locked', cause: { code: 'SQLITE_BUSY' } });
  });

  it('gives a refused batch back as a StoreConflictError naming the stream and seqs', async () => {
    const store = openThreaded();
    await store.append(runesOf('a', 1, 2));
    const error = await store.append([runeOf('a', 2)]).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(StoreConflictError);
    expect(error).toMatchObject({ code: 'seq_conflict', stream: 'a', expectedSeq: 3, gotSeq: 2 });
  });

  it('lists heads a page at a time, and a listing stopped early leaves the store usable', async () => {
    const store = openThreaded();
    const streams = Array.from({ length: 2500 }, (_, i) => `s${String(i).padStart(4, '0')}`);
    await store.append(streams.flatMap((stream) => runesOf(stream, 1, 1)));
    const listed: string[] = [];
    for await (const head of store.heads()) listed.push(head.stream);
    expect(listed).toEqual(streams);
    for await (const head of store.heads({ prefix: 's1' })) {
      expect(head.stream).toBe('s1000');
      break;
    }
    expect(await store.head('s2499')).toMatchObject({ seq: 1 });
  });

  it('rejects every call after close() with `closed`', async () => {
    const store = sqliteStore(freshPath(), { thread: true });
    await store.close();
    await store.close();
    await expect(store.head('a')).rejects.toMatchObject({ code: 'closed' });
    await expect(store.append(runesOf('a', 1, 1))).rejects.toMatchObject({ code: 'closed' });
  });

  it('checks its option like the others', () => {
    expect(() => sqliteStore(freshPath(), { thread: 'yes' as never })).toThrow(new TypeError('sqliteStore: the "thread" option must be a boolean, got "yes"'));
  });

  it('holds an engine whose acknowledged dispatches are in the file after a restart', async () => {
    const path = freshPath();
    const engine = createEngine({ store: sqliteStore(path, { thread: true }) });
    await engine.spawn('call', 'tool-call', { callId: 'c1', toolName: 'ls', arguments: {} });
    expect(await engine.dispatch('call', { type: 'no_approval_needed' })).toMatchObject({ accepted: true });
    expect(await engine.dispatch('call', { type: 'success', output: 'a.txt' })).toMatchObject({ accepted: true, rune: { seq: 3 } });
    await engine.close(); // closes the store, and its thread
    const again = createEngine({ store: openThreaded(path) });
    const hydrated = await again.snapshot<{ value: string }>('call');
    expect([hydrated?.seq, hydrated?.state.value]).toEqual([3, 'completed_result']);
    await again.close();
  });
});

describe('a process whose threaded store is never closed', () => {
  it('still exits, and the file keeps every acknowledged batch', () => {
    const path = freshPath();
    const script = `
      import { sqliteStore } from ${JSON.stringify(new URL('../../src/streams/sqlite-store.ts', import.meta.url).href)};
      const store = sqliteStore(${JSON.stringify(path)}, { thread: true });
      await store.append([{ stream: 'a', seq: 1, machine: 'counter', kind: 'spawned', event: { type: 'spawn' }, at: 0 }]);
      console.log('appended');
    `;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(child.stderr).toBe('');
    expect(child.stdout.trim()).toBe('appended');
    expect(child.status).toBe(0);
    return (async () => {
      const store = openThreaded(path);
      expect(await store.head('a')).toMatchObject({ seq: 1 });
    })();
  });
});
