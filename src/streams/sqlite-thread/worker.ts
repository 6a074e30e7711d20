/**
 * The store's thread: opens the file with the in-thread {@link sqliteStore} and answers the calls
 * the main thread's {@link threadedSqliteStore} sends, one at a time, in the order they came.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { sqliteStore } from '../sqlite-store.js';
import type { HeadsQuery, RuneStore, StreamHead } from '../store.js';
import { answerBlocking } from './blocking-answers.js';
import { toWire, type ThreadReply, type ThreadRequest } from './wire.js';
import type { ThreadData } from './spawn.js';

const { path, options, signal, answers } = workerData as ThreadData;

/** Answers on `answers`, for a main thread that waits for it blocking. */
const toWaiter = (message: unknown): void => answerBlocking(signal, answers, message);

let store: RuneStore | undefined;
try {
  store = sqliteStore(path, options);
  toWaiter({});
} catch (error) {
  toWaiter({ error: toWire(error) });
}

/** The listings of heads being read, by the id the main thread gave each. */
const listings = new Map<number, AsyncIterator<StreamHead>>();

async function answer(request: ThreadRequest): Promise<unknown> {
  const open = store!;
  switch (request.method) {
    case 'heads': {
      const [query, page] = request.args;
      let listing = listings.get(request.listing);
      if (listing === undefined) listings.set(request.listing, (listing = open.heads(query as HeadsQuery)[Symbol.asyncIterator]()));
      const heads: StreamHead[] = [];
      while (heads.length < page) {
        const next = await listing.next();
        if (next.done === true) {
          listings.delete(request.listing);
          return { heads, done: true };
        }
        heads.push(next.value);
      }
      return { heads, done: false };
    }
    case 'endHeads':
      await listings.get(request.listing)?.return?.();
      listings.delete(request.listing);
      return undefined;
    default:
      // Called at once, in arrival order: the in-thread store does its work when called, so each
      // call sees every call before it, as it would in one thread.
      return (open[request.method] as (...args: readonly unknown[]) => Promise<unknown>)(...request.args);
  }
}

if (store !== undefined) {
  const port = parentPort!;
  port.on('message', (request: ThreadRequest) => {
    const reply = (message: ThreadReply): void => (request.blocking === true ? toWaiter(message) : port.postMessage(message));
    answer(request).then(
      (value) => reply({ id: request.id, value }),
      (error: unknown) => reply({ id: request.id, error: toWire(error) }),
    );
  });
}
