import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { isDeepStrictEqual } from 'node:util';
import Database from 'better-sqlite3';
import { firstValueFrom } from 'rxjs';
import { chatActor, type ChatActorEvent, type ChatActorState } from '../src/reducers/chat-actor/index.js';
import { createEngine, type DispatchResult } from '../src/streams/engine.js';
import type { Rune } from '../src/reducers/rune.js';
import { sqliteStore } from '../src/streams/sqlite-store.js';

const RUNES = 10_000;
const RUNS = 20;
const WARMUP = 2;
const BAR_MS = 20;
const STREAM = 'chat-actor/7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';

const events: readonly ChatActorEvent[] = [
  { type: 'ProcessInteraction', userId: '0b6e7a52-2f7d-4c1e-8d4a-5a1f3c9e2100' },
  { type: 'InteractionComplete', success: true },
];
/** The event of seq `seq` (2..RUNES): ProcessInteraction and InteractionComplete in turn. */
const eventAt = (seq: number): ChatActorEvent => events[seq % 2]!;

/** The state after RUNES runes, folded here without the engine or the store. */
function expectedState(): ChatActorState {
  let state = chatActor.initial();
  for (let seq = 2; seq <= RUNES; seq++) state = chatActor.transition(state, eventAt(seq));
  return state;
}

/** Writes the stream through an engine on a new file: a spawn, then RUNES - 1 dispatches fired in batches of 1,000. */
async function build(path: string, snapshotEvery: number): Promise<void> {
  const engine = createEngine({ store: sqliteStore(path), snapshotEvery });
  const spawned = await engine.spawn(STREAM, chatActor);
  if (!spawned.accepted) throw new Error(`spawn refused: ${spawned.reason}`);
  for (let seq = 2; seq <= RUNES; ) {
    const batch: Promise<DispatchResult>[] = [];
    for (const end = Math.min(seq + 1000, RUNES + 1); seq < end; seq++) batch.push(engine.dispatch(STREAM, eventAt(seq)));
    for (const result of await Promise.all(batch)) if (!result.accepted) throw new Error(`dispatch refused: ${result.reason}`);
  }
  await engine.close();
}

interface Timing {
  ms: number[];
  /** The first (warm-up) run on this file. */
  first: number;
  median: number;
  max: number;
  /** The seq of the snapshot hydration started from (0: none). */
  snapshotSeq: number;
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/**
 * Hydrates the stream from the file `WARMUP + RUNS` times, each time in a fresh engine on a freshly
 * opened store: the time from subscribing to `state$` to its first value, which is the hydration
 * (head, newest snapshot, then reading and folding every rune after it). Each state is checked.
 */
async function hydrate(path: string, expected: ChatActorState): Promise<Timing> {
  const ms: number[] = [];
  let snapshotSeq = 0;
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const store = sqliteStore(path);
    snapshotSeq = (await store.latestSnapshot(STREAM))?.seq ?? 0;
    const engine = createEngine({ store });
    const start = performance.now();
    const state = await firstValueFrom(engine.state$<ChatActorState>(STREAM));
    ms.push(performance.now() - start);
    await engine.close();
    // Through JSON, as the store keeps it: properties set to undefined are not stored.
    if (!isDeepStrictEqual(state, JSON.parse(JSON.stringify(expected)))) {
      throw new Error(`hydrated ${JSON.stringify(state)}, expected ${JSON.stringify(expected)}`);
    }
  }
  const measured = ms.slice(WARMUP);
  return { ms: measured, first: ms[0]!, median: median(measured), max: Math.max(...measured), snapshotSeq };
}

/**
 * Where the time of one hydration without a snapshot goes, medians of `RUNS` repetitions:
 * - `read`: the store's `read` of every rune, as hydration calls it (SQL, then a rune per row);
 * - `rows`: the same query alone through better-sqlite3 (the rows as objects, no JSON.parse);
 * - `parse`: `JSON.parse` of the 10,000 bodies alone;
 * - `fold`: `chatActor.transition` over the 10,000 events alone;
 * - `eventsOnly`: what hydration needs and nothing more: SQLite extracts each event
 *   (`body -> '$.event'`), one string column is read, parsed and folded. A store method of this
 *   kind is the suggested fix when the bar is missed.
 */
async function profile(path: string): Promise<{ read: number; rows: number; parse: number; fold: number; eventsOnly: number }> {
  const store = sqliteStore(path);
  const db = new Database(path, { readonly: true, fileMustExist: true });
  const rowsQuery = db.prepare<[string], { seq: number; kind: string; body: string }>('SELECT seq, kind, body FROM runes WHERE stream = ? ORDER BY seq');
  const eventsQuery = db.prepare<[string], string>(`SELECT body -> '$.event' FROM runes WHERE stream = ? ORDER BY seq`).pluck();
  const times = { read: [] as number[], rows: [] as number[], parse: [] as number[], fold: [] as number[], eventsOnly: [] as number[] };
  const time = (into: number[], work: () => unknown): void => {
    const start = performance.now();
    work();
    into.push(performance.now() - start);
  };
  const foldEvents = (events: readonly ChatActorEvent[]): ChatActorState => {
    let state = chatActor.initial();
    for (let i = 1; i < events.length; i++) state = chatActor.transition(state, events[i]!);
    return state;
  };
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const start = performance.now();
    const runes: Rune[] = await store.read(STREAM, 0, RUNES);
    times.read.push(performance.now() - start);
    let bodies: string[] = [];
    time(times.rows, () => (bodies = rowsQuery.all(STREAM).map((row) => row.body)));
    time(times.parse, () => bodies.forEach((body) => JSON.parse(body)));
    const events = runes.map((rune) => rune.event as ChatActorEvent);
    let folded: ChatActorState | undefined;
    time(times.fold, () => (folded = foldEvents(events)));
    let fast: ChatActorState | undefined;
    time(times.eventsOnly, () => (fast = foldEvents(eventsQuery.all(STREAM).map((text) => JSON.parse(text) as ChatActorEvent))));
    if (runes.length !== RUNES || !isDeepStrictEqual(folded, fast)) throw new Error('profile: the events-only fold differs from the fold of the runes');
  }
  db.close();
  await store.close();
  const m = (values: number[]): number => median(values.slice(WARMUP));
  return { read: m(times.read), rows: m(times.rows), parse: m(times.parse), fold: m(times.fold), eventsOnly: m(times.eventsOnly) };
}

const f = (ms: number): string => `${ms.toFixed(2)} ms`;

/**
 * Issue 3's bar: hydrating a 10,000-rune chatActor stream from SQLite in at most 20 ms (the median
 * of 20 runs, after 2 warm-up runs). The stream is written with `snapshotEvery: 0`, so hydration
 * folds all 10,000 runes; the same stream written with the default snapshots (every 1,000 runes)
 * is timed too, for information.
 */
export async function benchHydration(): Promise<boolean> {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-bench-'));
  try {
    const expected = expectedState();
    const noSnapshots = join(dir, 'no-snapshots.db');
    const snapshots = join(dir, 'snapshots.db');
    await build(noSnapshots, 0);
    await build(snapshots, 1000);

    const full = await hydrate(noSnapshots, expected);
    const fromSnapshot = await hydrate(snapshots, expected);
    if (full.snapshotSeq !== 0) throw new Error(`the snapshotEvery: 0 file has a snapshot at seq ${full.snapshotSeq}`);

    const ok = full.median <= BAR_MS;
    console.log(`\nhydration: a ${RUNES.toLocaleString('en-US')}-rune chatActor stream from SQLite, fresh engine, state$ first value (${RUNS} runs)`);
    console.log(`  no snapshot (folds all ${RUNES} runes)   median ${f(full.median)}, max ${f(full.max)}, first run ${f(full.first)}`);
    console.log(
      `  snapshot every 1000 (from seq ${fromSnapshot.snapshotSeq}, folds ${RUNES - fromSnapshot.snapshotSeq})`.padEnd(44) +
        ` median ${f(fromSnapshot.median)}, max ${f(fromSnapshot.max)}, first run ${f(fromSnapshot.first)}  (information)`,
    );
    const where = await profile(noSnapshots);
    console.log(`  where the time goes, no snapshot (medians):`);
    console.log(`    store.read of all ${RUNES} runes         ${f(where.read)}`);
    console.log(`      of which: the SQL rows as objects  ~${f(where.rows)}, JSON.parse of the bodies ~${f(where.parse)}, the rest building runes`);
    console.log(`    folding them (chatActor.transition)  ${f(where.fold)}`);
    console.log(`    events only (SQL body -> '$.event', parse, fold): ${f(where.eventsOnly)}, the whole hydration's work`);
    if (!ok) {
      console.log(`  suggestions: hydration needs only the events, not ${RUNES} Rune objects: a store method that reads them`);
      console.log(`    (sqlite: SELECT body -> '$.event', pluck, JSON.parse; memory: the runes' events) is the "events only" figure;`);
      console.log(`    a schema with the event in its own column saves SQLite's extraction too; snapshots (default every 1,000) bound it.`);
    }
    console.log(`  median ${f(full.median)} (bar: <= ${BAR_MS} ms)  ${ok ? 'PASS' : 'FAIL'}`);
    return ok;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
