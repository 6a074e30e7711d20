import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { chatActor, chatActorLifecycle, createEngine, memoryStore, type Epic, type Rune, type RuneStore, type StreamHead } from '../src/index.js';
import { checkBatch } from '../src/streams/store.js';

/**
 * A store that accepts every append and keeps only each stream's head (machine and last seq):
 * the memory store would count rune storage against the engine. Its own share of the heap is
 * measured (by dropping the heads at the end) and reported apart.
 */
function headsOnlyStore(): RuneStore & { readonly kept: Map<string, { machine: string; seq: number }> } {
  const heads = new Map<string, { machine: string; seq: number }>();
  return {
    kept: heads,
    async *heads() {},
    async append(runes: readonly Rune[]) {
      const last = checkBatch(runes, (stream) => heads.get(stream)?.seq ?? 0);
      for (const rune of runes) if (rune.seq === 1) heads.set(rune.stream, { machine: rune.machine, seq: 0 });
      for (const [stream, seq] of last) heads.get(stream)!.seq = seq;
    },
    async head(stream: string): Promise<StreamHead | undefined> {
      const h = heads.get(stream);
      return h === undefined ? undefined : { stream, machine: h.machine, seq: h.seq, at: 0 };
    },
    async read() {
      return [];
    },
    async readEvents() {
      return [];
    },
    async latestSnapshot() {
      return undefined;
    },
    async saveSnapshot() {},
    async prune() {
      return 0;
    },
    async close() {},
  };
}

/**
 * `global.gc` when node runs with `--expose-gc`; otherwise the same function obtained at run time
 * (V8's flag set now, `gc` then read from a fresh context), so `tsx bench/run.ts` needs no flag.
 */
function collector(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (typeof exposed === 'function') return exposed;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** Heap in use after full collections (twice: the first may leave finalizable garbage for the second). */
function heapAfterGc(gc: () => void): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

/**
 * Issue 3's bar: a million idle chatActor sessions in one process, each costing the engine at
 * most 1 KB of heap beyond its state object. Sessions are spawned (their spawn rune durable) and
 * left idle with no subscriber. The per-session figure counts everything the engine keeps: the
 * instance, its map entries and its stream id string; it leaves out the state object (measured
 * as an array of N fresh initial states, less the array) and the test store's heads.
 * `BENCH_SESSIONS` sets N (default 1,000,000).
 */
export async function benchIdleSessions(): Promise<boolean> {
  const n = Number(process.env.BENCH_SESSIONS ?? 1_000_000);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`BENCH_SESSIONS must be a positive integer, got ${process.env.BENCH_SESSIONS}`);
  const gc = collector();
  const started = performance.now();

  // The state object: N fresh initial states in an array, less an array of N references to one.
  // Each array is read after its measurement: V8 collects a value no later code uses.
  const beforeStates = heapAfterGc(gc);
  const states: unknown[] = [];
  for (let i = 0; i < n; i++) states.push(chatActor.initial());
  const withStates = heapAfterGc(gc);
  if (states.length !== n) throw new Error('unreachable');
  states.length = 0;
  const beforeRefs = heapAfterGc(gc);
  const shared = chatActor.initial();
  const refs: unknown[] = [];
  for (let i = 0; i < n; i++) refs.push(shared);
  const withRefs = heapAfterGc(gc);
  if (refs.length !== n) throw new Error('unreachable');
  refs.length = 0;
  const stateBytes = (withStates - beforeStates - (withRefs - beforeRefs)) / n;

  const store = headsOnlyStore();
  // Each session's inactivity clock is armed (one timer-wheel entry per session, one scheduled action).
  const epics: Epic[] = [chatActorLifecycle()];
  const engine = createEngine({ store, epics });
  await new Promise((resolve) => setTimeout(resolve, 0)); // epics start on a microtask: let them subscribe
  const before = heapAfterGc(gc);

  // Spawned in batches, so the in-flight promises of a million spawns never pile up at once.
  const batch = 10_000;
  for (let from = 0; from < n; from += batch) {
    const spawns: Promise<unknown>[] = [];
    for (let i = from; i < Math.min(n, from + batch); i++) spawns.push(engine.spawn(`chat-${i}`, chatActor));
    const results = (await Promise.all(spawns)) as { accepted: boolean; reason?: string }[];
    const refused = results.find((r) => !r.accepted);
    if (refused !== undefined) throw new Error(`spawn refused: ${refused.reason}`);
  }
  await new Promise((resolve) => setTimeout(resolve, 0)); // anything queued behind the last batch settles
  const after = heapAfterGc(gc);
  if (engine.size !== n || store.kept.size !== n) {
    throw new Error(`expected ${n} sessions in memory and in the store, got ${engine.size} and ${store.kept.size}`);
  }

  // The store's share: what goes when its heads do (the stream ids stay, held by the engine).
  store.kept.clear();
  const withoutHeads = heapAfterGc(gc);
  const storeBytes = (after - withoutHeads) / n;
  const perSession = (after - before) / n - storeBytes - stateBytes;
  await engine.close();

  const ok = perSession <= 1024;
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(`\n${fmt(n)} idle chatActor sessions in one engine (store keeping heads only), heap after full GC`);
  console.log(`  heap growth per session                      ${fmt((after - before) / n).padStart(8)} B`);
  console.log(`  less the test store's heads                  ${fmt(storeBytes).padStart(8)} B`);
  console.log(`  less the state object                        ${fmt(stateBytes).padStart(8)} B`);
  console.log(`  engine overhead per session                  ${fmt(perSession).padStart(8)} B (bar: <= 1,024 B)  ${ok ? 'PASS' : 'FAIL'}`);
  console.log(`  (${seconds} s; inactivity timers ${epics.length > 0 ? 'armed' : 'not armed'})`);
  return ok && memoryStoreSessions(gc);
}

/**
 * The memory store's own cost of a young stream (an idle session is one spawn rune): at most
 * 1 KB of heap each, rune included. A stream's first chunk of columns grows with it: allocated
 * whole, it was about 40 KB per stream.
 */
function memoryStoreSessions(gc: () => void): boolean {
  const n = 100_000;
  const before = heapAfterGc(gc);
  const store = memoryStore();
  const event = { type: 'spawn' };
  for (let i = 0; i < n; i++) {
    store.appendSync!({ stream: `chat-actor/${String(i).padStart(8, '0')}`, seq: 1, machine: chatActor.id, kind: 'spawned', event, to: 'idle', at: i });
  }
  const perStream = (heapAfterGc(gc) - before) / n;
  const ok = perStream <= 1024;
  console.log(`\n${fmt(n)} young streams in a memoryStore (one spawn rune each), heap after full GC`);
  console.log(`  heap per stream, its id and rune included     ${fmt(perStream).padStart(8)} B (bar: <= 1,024 B)  ${ok ? 'PASS' : 'FAIL'}`);
  void store.close();
  return ok;
}
