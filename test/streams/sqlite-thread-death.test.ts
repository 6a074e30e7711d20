import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { runesOf } from '../../src/store-kit.js';
import { sqliteStore } from '../../src/streams/sqlite-store.js';
import { StoreError } from '../../src/streams/store.js';

/** A store thread as this test holds it: it can be told to take no more calls (so one is surely waiting when it dies). */
type HeldWorker = Worker & { deaf: boolean };

// The store's thread is not reachable from outside: the workers it starts are recorded here, so a
// test can end one as a native crash in it would (a thread that dies on its own).
const started = vi.hoisted(() => [] as HeldWorker[]);
vi.mock('node:worker_threads', async (importOriginal) => {
  const original = await importOriginal<typeof import('node:worker_threads')>();
  class RecordedWorker extends original.Worker {
    deaf = false;
    constructor(...args: ConstructorParameters<typeof original.Worker>) {
      super(...args);
      started.push(this);
    }
    override postMessage(...args: Parameters<Worker['postMessage']>): void {
      if (!this.deaf) super.postMessage(...args);
    }
  }
  return { ...original, Worker: RecordedWorker };
});

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'runestream-thread-death-'));
  started.length = 0;
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('sqliteStore({ thread: true }) whose thread dies', () => {
  it('fails the call waiting on it and every later call with io_error, keeps what was committed, and closes', async () => {
    const path = join(dir, 'died.db');
    const store = sqliteStore(path, { thread: true });
    await store.append(runesOf('a', 1, 2));
    expect(started).toHaveLength(1);
    // A call the thread never answers: it is waiting when the thread dies.
    started[0]!.deaf = true;
    const waiting = store.read('a');
    await started[0]!.terminate();
    const failure = await waiting.then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(StoreError);
    expect(failure).toMatchObject({ code: 'io_error' });
    expect((failure as Error).message).toMatch(/its thread exited/);
    await expect(store.append(runesOf('a', 3, 1))).rejects.toMatchObject({ code: 'io_error' });
    await expect(store.head('a')).rejects.toMatchObject({ code: 'io_error' });
    await store.close();
    // The file keeps every batch whose append resolved, and opens again in this process.
    const again = sqliteStore(path);
    expect(await again.read('a')).toEqual(runesOf('a', 1, 2));
    await again.close();
  });
});
