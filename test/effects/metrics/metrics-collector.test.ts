import { afterEach, describe, expect, it } from 'vitest';
import { createEngine, memoryStore, type Engine, type EngineError, type Rune } from '../../../src/index.js';
import { createMetrics, METRICS_COLLECTOR_STREAM, metricsCollectorEpic, type MetricsSink, type MetricsSnapshot } from '../../../src/server/index.js';
import { ManualClock, settle } from '../llm/support.js';

let engine: Engine | undefined;
afterEach(async () => {
  await engine?.close();
  engine = undefined;
});

/** A sink that fails its writes `failing` times (after `okFirst` good ones), then works; every write attempt is recorded with its time. */
function flakySink(clock: ManualClock, failing: number, okFirst = 0) {
  const attempts: number[] = [];
  const written: MetricsSnapshot[] = [];
  let inits = 0;
  const sink: MetricsSink = {
    init: async () => {
      inits++;
    },
    write: async (snapshot) => {
      attempts.push(clock.now());
      if (attempts.length > okFirst && attempts.length <= okFirst + failing) throw new Error(`disk full (write ${attempts.length})`);
      written.push(snapshot);
    },
  };
  return { sink, attempts, written, inits: () => inits };
}

/** Runs the virtual clock to `to` in steps of `step` ms, letting promises (the sink's, the store's) settle at each. */
async function runTo(clock: ManualClock, to: number, step = 50): Promise<void> {
  for (let t = clock.now(); t <= to; t += step) {
    clock.advanceTo(t);
    for (let i = 0; i < 5; i++) await settle();
  }
}

/** The collector's runes as `from -> to @ at` (the spawn as `-> INITIALIZING @ 0`). */
const path = (runes: readonly Rune[]): string[] => runes.filter((r) => r.stream === METRICS_COLLECTOR_STREAM).map((r) => `${r.from ?? ''} -> ${r.to} @ ${r.at}`);

function collecting(clock: ManualClock, sink: MetricsSink, archived: MetricsSnapshot[], archiveEveryMs = 4500) {
  const metrics = createMetrics();
  const errors: EngineError[] = [];
  engine = createEngine({
    store: memoryStore(),
    scheduler: clock,
    epics: [
      metricsCollectorEpic({
        metrics,
        sink,
        flushEveryMs: 1000,
        archiveEveryMs,
        archiveSnapshot: async (snapshot) => void archived.push(snapshot),
        backoff: { baseMs: 100, maxMs: 1000 },
        random: () => 1, // no jitter: the full backoff, so the times are exact
      }),
    ],
  });
  const runes: Rune[] = [];
  engine.runes$().subscribe((rune) => runes.push(rune));
  engine.errors$.subscribe((error) => errors.push(error));
  metrics.observe(engine);
  return { runes, errors, metrics };
}

describe('metricsCollectorEpic: the MetricsCollector lifecycle under virtual time', () => {
  it('INITIALIZING -> RUNNING; a sink that fails twice: ERROR -> RECOVERING -> ERROR -> RECOVERING -> RUNNING with growing backoff; ARCHIVING -> RUNNING on schedule', async () => {
    const clock = new ManualClock();
    const archived: MetricsSnapshot[] = [];
    const flaky = flakySink(clock, 2);
    const { runes, errors } = collecting(clock, flaky.sink, archived);

    await runTo(clock, 7000);

    expect(path(runes)).toEqual([
      ' -> INITIALIZING @ 0',
      'INITIALIZING -> RUNNING @ 0',
      // The first flush fails: runtime_error, then a retry after 100 ms (one failure in a row).
      'RUNNING -> ERROR @ 1000',
      'ERROR -> RECOVERING @ 1100',
      // The recovery's write fails too: back to ERROR, and the retry waits 200 ms (two in a row).
      'RECOVERING -> ERROR @ 1100',
      'ERROR -> RECOVERING @ 1300',
      'RECOVERING -> RUNNING @ 1300',
      // archiveEveryMs after RUNNING was entered.
      'RUNNING -> ARCHIVING @ 5800',
      'ARCHIVING -> RUNNING @ 5800',
    ]);
    const error = runes.find((r) => r.to === 'ERROR');
    expect(error?.event).toEqual({ type: 'runtime_error', error: 'disk full (write 1)' });
    expect(flaky.inits()).toBe(1);
    // Written: the recovery's snapshot, then one a second while RUNNING; ARCHIVING pauses the
    // flushing, which starts over when RUNNING is entered again (5800 + 1000).
    expect(flaky.attempts).toEqual([1000, 1100, 1300, 2300, 3300, 4300, 5300, 6800]);
    expect(flaky.written.map((s) => s.at)).toEqual([1300, 2300, 3300, 4300, 5300, 6800]);
    // The snapshot is prom-client's JSON of the registry: it carries the collector's own runes.
    const runesFamily = flaky.written.at(-1)!.metrics.find((m) => m.name === 'runestream_runes_appended_total');
    expect(runesFamily?.values).toContainEqual({ value: 2, labels: { machine: 'metrics-collector', kind: 'runtime_error' } });
    expect(runesFamily?.values).toContainEqual({ value: 1, labels: { machine: 'metrics-collector', kind: 'recovered' } });
    expect(archived.map((s) => s.at)).toEqual([5800]);
    expect(errors).toEqual([]);
  });

  it('a sink whose init fails: binding_missing -> ERROR, then retried until a write succeeds', async () => {
    const clock = new ManualClock();
    let initFailed = false;
    const written: number[] = [];
    const sink: MetricsSink = {
      init: async () => {
        initFailed = true;
        throw new Error('METRICS_KV not bound');
      },
      write: async (snapshot) => void written.push(snapshot.at),
    };
    const { runes } = collecting(clock, sink, [], 0);
    await runTo(clock, 2500);
    expect(initFailed).toBe(true);
    expect(path(runes)).toEqual([' -> INITIALIZING @ 0', 'INITIALIZING -> ERROR @ 0', 'ERROR -> RECOVERING @ 100', 'RECOVERING -> RUNNING @ 100']);
    expect(runes[1]?.event).toEqual({ type: 'binding_missing', error: 'METRICS_KV not bound' });
    // archiveEveryMs 0: never archives.
    expect(written).toEqual([100, 1100, 2100]);
  });

  it('an archive that fails is retried through the archival run (ERROR -> RETRYING -> success); archive_done only once it is written', async () => {
    const clock = new ManualClock();
    const metrics = createMetrics();
    const errors: EngineError[] = [];
    const tried: number[] = [];
    const archived: MetricsSnapshot[] = [];
    engine = createEngine({
      scheduler: clock,
      epics: [
        metricsCollectorEpic({
          metrics,
          sink: flakySink(clock, 0).sink,
          flushEveryMs: 1000,
          archiveEveryMs: 500,
          archiveSnapshot: async (snapshot) => {
            tried.push(clock.now());
            if (tried.length === 1) throw new Error('cold storage offline');
            archived.push(snapshot);
          },
          backoff: { baseMs: 100, maxMs: 1000 },
          random: () => 1, // no jitter: the full backoff, so the times are exact
        }),
      ],
    });
    const runes: Rune[] = [];
    engine.runes$().subscribe((rune) => runes.push(rune));
    engine.errors$.subscribe((error) => errors.push(error));
    await runTo(clock, 700);
    // The collector stays ARCHIVING until the snapshot is written: archive_done after the retry's success.
    expect(path(runes).slice(0, 4)).toEqual([' -> INITIALIZING @ 0', 'INITIALIZING -> RUNNING @ 0', 'RUNNING -> ARCHIVING @ 500', 'ARCHIVING -> RUNNING @ 600']);
    // The archival run (seed 002's ArchivalService) of the collector's snapshots: the failed write waits the backoff (100 ms), then is written again.
    const run = runes.filter((r) => r.stream === `${METRICS_COLLECTOR_STREAM}/archive`).map((r) => `${r.from ?? ''} -> ${r.to} @ ${r.at}`);
    expect(run).toEqual([
      ' -> IDLE @ 500',
      'IDLE -> ARCHIVING @ 500',
      'ARCHIVING -> WRITING_TO_R2 @ 500',
      'WRITING_TO_R2 -> ERROR @ 500',
      'ERROR -> RETRYING @ 600',
      'RETRYING -> WRITING_TO_R2 @ 600',
      'WRITING_TO_R2 -> COMPLETED @ 600',
      'COMPLETED -> IDLE @ 600',
    ]);
    expect(runes.find((r) => r.to === 'ERROR' && r.stream.endsWith('/archive'))?.event).toEqual({ type: 'write_failed', error: 'cold storage offline' });
    // The same snapshot, taken when ARCHIVING began, is the one written on the retry.
    expect(tried).toEqual([500, 600]);
    expect(archived.map((s) => s.at)).toEqual([500]);
    expect(errors).toEqual([]);
  });

  it('an archive retry cut by a restart goes on in the next process, where the log says, and only its success is archive_done', async () => {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} }; // the log outlives the process, as a file would
    const archiving = (clock: ManualClock, archiveSnapshot: (snapshot: MetricsSnapshot) => Promise<void>) =>
      createEngine({
        store: kept,
        scheduler: clock,
        epics: [
          metricsCollectorEpic({
            metrics: createMetrics(),
            sink: flakySink(clock, 0).sink,
            flushEveryMs: 1000,
            archiveEveryMs: 500,
            archiveSnapshot,
            backoff: { baseMs: 100, maxMs: 1000 },
            random: () => 1,
          }),
        ],
      });
    const first = new ManualClock();
    engine = archiving(first, async () => {
      throw new Error('cold storage offline');
    });
    await runTo(first, 550); // the first write failed at 500; its retry is due at 600
    await engine.close();

    const archived: number[] = [];
    const clock = new ManualClock(580); // the next process starts before the retry is due
    engine = archiving(clock, async (snapshot) => void archived.push(snapshot.at));
    await runTo(clock, 700);
    const runes = await store.read(`${METRICS_COLLECTOR_STREAM}/archive`);
    expect(runes.map((r) => r.to)).toEqual(['IDLE', 'ARCHIVING', 'WRITING_TO_R2', 'ERROR', 'RETRYING', 'WRITING_TO_R2', 'COMPLETED', 'IDLE']);
    const retried = runes.find((r) => r.to === 'RETRYING')!;
    expect(retried.at).toBe(600); // the backoff counted from the failure's rune, not from the restart
    const written = runes.find((r) => r.to === 'COMPLETED')!;
    // The first snapshot died with its process: the retry writes a fresh one.
    expect(archived).toHaveLength(1);
    expect(archived[0]).toBeGreaterThanOrEqual(600);
    const collector = await store.read(METRICS_COLLECTOR_STREAM);
    expect(collector.map((r) => r.to)).toEqual(['INITIALIZING', 'RUNNING', 'ARCHIVING', 'RUNNING']);
    expect(collector.at(-1)!.at).toBeGreaterThanOrEqual(written.at);
  });

  it('refuses bad options with a TypeError naming the option', () => {
    const metrics = createMetrics();
    const sink = flakySink(new ManualClock(), 0).sink;
    expect(() => metricsCollectorEpic({ metrics, sink, flushEveryMs: 0 })).toThrow('"flushEveryMs" must be a positive integer (ms), got 0');
    expect(() => metricsCollectorEpic({ metrics, sink, archiveEveryMs: -1 })).toThrow('"archiveEveryMs" must be a non-negative integer (ms), got -1');
    expect(() => metricsCollectorEpic({ metrics, sink: {} as MetricsSink })).toThrow('"sink" must be a MetricsSink');
  });
});
