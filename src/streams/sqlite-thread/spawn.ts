import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import { StoreError } from '../store.js';
import type { SqliteStoreOptions } from '../sqlite-store.js';
import { blockingAnswers } from './blocking-answers.js';
import { fromWire, type WireError } from './wire.js';

/** What the store's thread starts with. */
export interface ThreadData {
  readonly path: string;
  readonly options: SqliteStoreOptions;
  /**
   * Counts the thread's answers on `answers`: the main thread waits, blocking, for it to move. The
   * first says how opening went; the others answer the calls made blocking (see `threadedSqliteStore`).
   */
  readonly signal: Int32Array;
  /** Where the thread answers what the main thread waits for, blocking: opening (`{}`, or `{ error }`), then blocking calls. */
  readonly answers: MessagePort;
}

/**
 * Starts the worker from this file's neighbour `worker` (`.js` once built; `.ts` in the source,
 * through tsx, which a worker does not inherit from its parent). Every failure to load it is told
 * as a failure to open, so the main thread never waits for a signal that does not come.
 */
const BOOTSTRAP = `
const { workerData } = require('node:worker_threads');
(async () => {
  try {
    if (workerData.tsx !== undefined) {
      const api = await import(workerData.tsx);
      (api.register ?? api.default.register)();
    }
    await import(workerData.entry);
  } catch (error) {
    workerData.answers.postMessage({ error: { name: 'Error', message: 'the store thread could not start: ' + (error && error.stack || String(error)) } });
    Atomics.add(workerData.signal, 0, 1);
    Atomics.notify(workerData.signal, 0);
  }
})();
`;

/** tsx's ESM API (`tsx/esm/api`'s import entry; `require.resolve` gives its CommonJS one), from where `here` is. */
const tsxEsmApi = (here: string): string => pathToFileURL(join(dirname(createRequire(here).resolve('tsx/package.json')), 'dist/esm/api/index.mjs')).href;

/**
 * Starts the store's thread on `path` and waits, blocking, until it opened the file: opening is
 * synchronous here as it is in one thread, and throws the same errors (`locked`, `invalid_file`, ...).
 */
export function startThread(path: string, options: SqliteStoreOptions): { worker: Worker; waitForAnswer(): unknown; closeAnswers(): void } {
  const here = import.meta.url;
  const source = here.endsWith('.ts');
  const entry = new URL(`./worker.${source ? 'ts' : 'js'}`, here).href;
  const signal = new Int32Array(new SharedArrayBuffer(4));
  const { port1: answers, port2 } = new MessageChannel();
  answers.unref();
  const workerData = { path, options, signal, answers: port2, entry, tsx: source ? tsxEsmApi(here) : undefined };
  /** Blocks until the thread's next answer on `answers`, and takes it (`undefined`: the thread ended without one). */
  const waitForAnswer = blockingAnswers(signal, answers);
  const worker = new Worker(BOOTSTRAP, {
    eval: true,
    workerData,
    transferList: [port2],
    // None of this process's flags: `--input-type=module` would read the bootstrap as a module, and
    // the thread needs none of them (a loader it needs, tsx in the source, it registers itself).
    execArgv: [],
  });
  const said = waitForAnswer() as { error?: WireError } | undefined;
  if (said === undefined || said.error !== undefined) {
    answers.close();
    void worker.terminate();
    throw said === undefined ? new StoreError('io_error', `sqliteStore "${path}": its thread ended before it said whether the file opened`) : fromWire(said.error!);
  }
  return { worker, waitForAnswer, closeAnswers: () => answers.close() };
}
