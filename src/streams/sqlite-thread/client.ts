import type { Rune } from '../../reducers/rune.js';
import type { SqliteStoreOptions } from '../sqlite-store.js';
import { openState, StoreError, type HeadsQuery, type RuneStore, type Snapshot, type StreamHead } from '../store.js';
import { startThread } from './spawn.js';
import { fromWire, type ThreadReply, type ThreadRequest } from './wire.js';

/** Heads a listing reads from the thread per page. */
const HEADS_PAGE = 1000;

type Pending = { resolve(value: unknown): void; reject(error: unknown): void };
type Method = Exclude<ThreadRequest['method'], 'heads' | 'endHeads'>;
/** A request before it is given its id (each member of the union on its own). */
type Unsent = ThreadRequest extends infer R ? (R extends ThreadRequest ? Omit<R, 'id'> : never) : never;

/**
 * How a threaded store's calls get their answers: `'async'`, as messages this thread's event loop
 * takes when they come; `'blocking'`, this thread waiting for each (`Atomics.wait`), so that a call's
 * promise settles at once, as the in-thread store's does. The simulation runs the thread blocking:
 * its runs replay from their seed only if every answer comes at the same point of the run, which
 * real threads' timing would not give it. (A thread that dies while a blocking call waits leaves
 * this thread waiting for good: another reason it is the simulation's mode only.)
 */
export type ThreadAnswers = 'async' | 'blocking';

/**
 * The SQLite store with its file in a thread of its own (`sqliteStore(path, { thread: true })`): the
 * same contract, errors and file as the in-thread store, whose code the thread runs. Each call is a
 * message to the thread and its answer a message back, so SQLite's work (a commit, a read, JSON
 * encoding and decoding of the runes) runs beside this thread's event loop instead of in it; the
 * runes are copied across (structured clone).
 *
 * A thread that dies on its own (a native crash in it) fails the call waiting on it and every later
 * one with `io_error` ("its thread exited"); `close()` then resolves, and the file, released with
 * the thread, opens again.
 *
 * The thread keeps the process alive only while a call is waiting for its answer: a process that
 * forgets `close()` still exits (the operating system then drops the file's lock, as it does at a
 * crash; the WAL keeps every committed batch).
 */
export function threadedSqliteStore(path: string, options: SqliteStoreOptions, answers: ThreadAnswers = 'async'): RuneStore {
  const { worker, waitForAnswer, closeAnswers } = startThread(path, options);
  worker.unref();
  const pending = new Map<number, Pending>();
  let nextId = 1;
  let nextListing = 1;
  /** Why the thread is gone (it failed, or `close()` ended it): every call after it rejects with it. */
  let ended: StoreError | undefined;
  const { open, close } = openState();

  const fail = (why: string): void => {
    ended ??= new StoreError('io_error', `sqliteStore "${path}": its thread ${why}; the file holds every batch whose append resolved`);
    for (const waiting of pending.values()) waiting.reject(ended);
    pending.clear();
    worker.unref();
  };
  worker.on('message', (reply: ThreadReply) => {
    const waiting = pending.get(reply.id);
    if (waiting === undefined) return;
    pending.delete(reply.id);
    if (pending.size === 0) worker.unref();
    if (reply.error === undefined) waiting.resolve(reply.value);
    else waiting.reject(fromWire(reply.error));
  });
  worker.on('error', (error) => fail(`failed (${error.message})`));
  worker.on('exit', (code) => fail(`exited (code ${code})`));

  const ask = <T>(request: Unsent): Promise<T> => {
    if (ended !== undefined) return Promise.reject(ended);
    const id = nextId++;
    if (answers === 'blocking') {
      worker.postMessage({ ...request, id, blocking: true });
      const reply = waitForAnswer() as ThreadReply | undefined;
      if (reply === undefined) {
        fail('ended without answering');
        return Promise.reject(ended);
      }
      return reply.error === undefined ? Promise.resolve(reply.value as T) : Promise.reject(fromWire(reply.error));
    }
    return new Promise<T>((resolve, reject) => {
      if (pending.size === 0) worker.ref();
      pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      worker.postMessage({ ...request, id });
    });
  };
  const call = async <T>(method: Method, ...args: unknown[]): Promise<T> => {
    open();
    return ask<T>({ method, args });
  };

  return {
    append: (runes, appendOptions) => call('append', runes, appendOptions),
    head: (stream) => call<StreamHead | undefined>('head', stream),
    async *heads(query: HeadsQuery = {}) {
      open();
      const listing = nextListing++;
      let done = false;
      try {
        while (!done) {
          const page = await ask<{ heads: StreamHead[]; done: boolean }>({ method: 'heads', listing, args: [query, HEADS_PAGE] });
          done = page.done;
          yield* page.heads;
        }
      } finally {
        if (!done && ended === undefined) await ask({ method: 'endHeads', listing, args: [] });
      }
    },
    read: (stream, afterSeq, limit) => call<Rune[]>('read', stream, afterSeq, limit),
    readEvents: (stream, afterSeq, limit) => call<Rune['event'][]>('readEvents', stream, afterSeq, limit),
    latestSnapshot: (stream) => call<Snapshot | undefined>('latestSnapshot', stream),
    saveSnapshot: (snapshot) => call('saveSnapshot', snapshot),
    prune: (stream, throughSeq) => call<number>('prune', stream, throughSeq),
    restore: (runes) => call<number>('restore', runes),
    async close() {
      if (!close()) return;
      try {
        // A thread that died has nothing left to close: its calls failed, and closing does not fail too.
        if (ended === undefined) await ask({ method: 'close', args: [] });
      } finally {
        ended ??= new StoreError('closed', 'the store is closed');
        closeAnswers();
        await worker.terminate();
      }
    },
  };
}
