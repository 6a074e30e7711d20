import { EMPTY, Observable, catchError, concat, defer, exhaustMap, from, ignoreElements, interval, map, merge, mergeMap, of, switchMap, take, toArray } from 'rxjs';
import { archival } from '../../reducers/archival/machine.js';
import { backoffDelay, resolveBackoff, type BackoffOptions } from '../../reducers/backoff.js';
import { errorText } from '../../reducers/error-text.js';
import { metricsCollector } from '../../reducers/metrics-collector/machine.js';
import type { MetricsCollectorEvent } from '../../reducers/metrics-collector/schema.js';
import { durableDeadline } from '../../streams/durable-deadline.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand, EpicContext } from '../../streams/epic.js';
import type { EffectsByKey, StreamView } from '../../streams/state-effects.js';
import { archivalRunEffects, type ArchivalRunOutput } from '../archival/archival-run.js';
import type { RunestreamMetrics } from './metrics.js';
import type { MetricsSink, MetricsSnapshot } from './metrics-sink.js';

/** The collector's stream: one per log. */
export const METRICS_COLLECTOR_STREAM = 'metrics/collector';

/** Options of {@link metricsCollectorEpic}, each with its default but `metrics` and `sink`. */
export interface MetricsCollectorOptions {
  /** The metrics it snapshots. Required. */
  readonly metrics: RunestreamMetrics;
  /** Where each snapshot is written. Required (e.g. `fileMetricsSink(path)`). */
  readonly sink: MetricsSink;
  /** A snapshot is written every this many ms while RUNNING. Default 15,000. */
  readonly flushEveryMs?: number;
  /**
   * RUNNING goes to ARCHIVING this many ms after it was entered (after the last archive, or a
   * recovery), when `archiveSnapshot` is given. `0`: never. Default 3,600,000 (an hour).
   */
  readonly archiveEveryMs?: number;
  /**
   * Hands a snapshot to long-term storage in ARCHIVING, as the write of an archival run (seed
   * 002's ArchivalService, stream `<stream>/archive`): the snapshot is taken when the run starts;
   * a rejection is `write_failed` (-> ERROR), retried after `backoff` (-> RETRYING) with the same
   * snapshot until it resolves, and only then `archive_done` (ARCHIVING -> RUNNING). So a snapshot
   * is never lost to a failed write, and the collector stays ARCHIVING while it is retried.
   * Default: none, and the collector never archives.
   */
  readonly archiveSnapshot?: (snapshot: MetricsSnapshot) => Promise<void>;
  /**
   * The wait before each `retry` out of ERROR, the collector's and its archival run's: exponential
   * with full jitter. Default `{ baseMs: 1000, maxMs: 60_000 }`.
   */
  readonly backoff?: BackoffOptions;
  /** The jitter's random numbers in [0, 1). Default `Math.random`. */
  readonly random?: () => number;
  /**
   * The collector's stream. Its effects are this process's own (they snapshot its metrics), so
   * they run here whoever owns the stream: processes sharing a log each need a stream of their
   * own (`runestream serve --store` names it after the process). Default `metrics/collector`.
   */
  readonly stream?: string;
}

type View = StreamView<typeof metricsCollector>;
type Event = MetricsCollectorEvent;

const checkMs = (name: string, value: number, zero: boolean): number => {
  if (!Number.isInteger(value) || value < 0 || (value === 0 && !zero)) {
    throw new TypeError(`metricsCollectorEpic: "${name}" must be a ${zero ? 'non-negative' : 'positive'} integer (ms), got ${String(value)}`);
  }
  return value;
};

/** How many failures in a row led to this ERROR: the runes into ERROR since the collector last left RECOVERING or INITIALIZING for RUNNING. */
function failuresInARow(view: View, context: EpicContext): Observable<number> {
  return context.read(view.stream, Math.max(0, view.seq - 64)).pipe(
    toArray(),
    map((runes) => {
      let failures = 0;
      for (let i = runes.length - 1; i >= 0 && runes[i]!.to !== 'RUNNING'; i--) if (runes[i]!.seq <= view.seq && runes[i]!.to === 'ERROR') failures++;
      return Math.max(1, failures);
    }),
  );
}

/**
 * The metrics collector's lifecycle (seed 002's MetricsCollector), as an epic: it spawns
 * {@link METRICS_COLLECTOR_STREAM} at start and keeps its effects reconciled with its state.
 *
 * 1. INITIALIZING: the sink's `init`, then `initialized` (or `binding_missing` with the error).
 * 2. RUNNING: a snapshot (`metrics.snapshot`) written to the sink every `flushEveryMs`; a write
 *    that fails is `runtime_error`. With `archiveSnapshot`, `archive_triggered` is due
 *    `archiveEveryMs` after RUNNING was entered: a durable deadline, kept across a restart.
 * 3. ERROR: `retry` after the backoff of the failures in a row (counted from the log); RECOVERING
 *    writes a snapshot: `recovered` if it is written, else `runtime_error` (back to ERROR, waiting longer).
 * 4. ARCHIVING: an archival run `<stream>/archive` (spawned on first use) takes a snapshot and
 *    hands it to `archiveSnapshot`; a failed write goes ERROR -> RETRYING after the backoff and is
 *    written again, the same snapshot, until it succeeds; then `archive_done`. After a restart a
 *    run under way goes on where the log says (with a fresh snapshot: the old one died with the process).
 *
 * Every timer runs on the engine's scheduler, so the lifecycle runs in virtual time in tests.
 *
 * ## Example
 * ```ts
 * import { filter, firstValueFrom } from 'rxjs';
 * import { createEngine } from 'runestream';
 * import { createMetrics, memoryMetricsSink, metricsCollectorEpic, METRICS_COLLECTOR_STREAM } from 'runestream/server';
 * const metrics = createMetrics();
 * const sink = memoryMetricsSink();
 * const engine = createEngine({ epics: [metricsCollectorEpic({ metrics, sink, flushEveryMs: 10 })] });
 * metrics.observe(engine);
 * await firstValueFrom(engine.runes$().pipe(filter((rune) => rune.stream === METRICS_COLLECTOR_STREAM && rune.to === 'RUNNING')));
 * console.log('collecting'); // Logs: collecting
 * await engine.close();
 * ```
 */
export function metricsCollectorEpic(options: MetricsCollectorOptions): Epic {
  const { metrics, sink, archiveSnapshot, random = Math.random, stream = METRICS_COLLECTOR_STREAM } = options;
  if (metrics === undefined || typeof metrics.snapshot !== 'function') throw new TypeError('metricsCollectorEpic: "metrics" must be what createMetrics() returns');
  if (sink === undefined || typeof sink.write !== 'function') throw new TypeError('metricsCollectorEpic: "sink" must be a MetricsSink ({ write(snapshot), init?() })');
  const flushEveryMs = checkMs('flushEveryMs', options.flushEveryMs ?? 15_000, false);
  const archiveEveryMs = checkMs('archiveEveryMs', options.archiveEveryMs ?? 3_600_000, true);
  const backoff = resolveBackoff(options.backoff ?? { baseMs: 1000, maxMs: 60_000 });

  const write = (context: EpicContext): Observable<never> => defer(async () => sink.write(await metrics.snapshot(context.scheduler.now()))).pipe(ignoreElements());
  const failed = (type: 'binding_missing' | 'runtime_error') => (error: unknown) => of<Event>({ type, error: errorText(error) });

  const effects = (view: View, context: EpicContext): EffectsByKey<typeof metricsCollector> => {
    if (view.stream !== stream) return {};
    const { scheduler } = context;
    switch (view.value) {
      case 'INITIALIZING':
        return {
          init: defer(async () => sink.init?.()).pipe(
            map((): Event => ({ type: 'initialized' })),
            catchError(failed('binding_missing')),
          ),
        };
      case 'RUNNING':
        return {
          // A tick while a write is in flight is skipped; the first failure ends the flushing.
          flush: interval(flushEveryMs, scheduler).pipe(
            exhaustMap(() => write(context)),
            catchError(failed('runtime_error')),
          ),
          archiveDue:
            archiveSnapshot === undefined || archiveEveryMs === 0
              ? undefined
              : durableDeadline(view.at + archiveEveryMs, { type: 'archive_triggered' } as Event, { scheduler, resolutionMs: 1, retryMs: flushEveryMs }),
        };
      case 'ERROR':
        return {
          retry: failuresInARow(view, context).pipe(
            switchMap((attempt) =>
              durableDeadline(view.at + backoffDelay(attempt, backoff, random), { type: 'retry' } as Event, { scheduler, resolutionMs: 1, retryMs: backoff.maxMs }),
            ),
          ),
        };
      case 'RECOVERING':
        return { probe: concat(write(context), of<Event>({ type: 'recovered' })).pipe(catchError(failed('runtime_error'))) };
      case 'ARCHIVING':
        // Starts the archival run, unless one is under way (resumed after a restart): its end brings archive_done.
        return {
          archive: context.snapshot(archiveRun, archival).pipe(
            take(1),
            mergeMap((run): Observable<EpicCommand> => {
              const start: EpicCommand = { stream: archiveRun, event: { type: 'start' } };
              if (run === undefined) return from([{ stream: archiveRun, spawn: archival.id }, start]);
              return run.state.value === 'IDLE' ? of(start) : EMPTY;
            }),
          ),
        };
      default:
        return {};
    }
  };

  /** The archival run of the collector's snapshots, and the snapshot it writes (taken when the run starts, kept for its retries). */
  const archiveRun = `${stream}/archive`;
  let toArchive: MetricsSnapshot | undefined;
  const archiveRuns = stateEffects({
    name: 'metricsArchival',
    machine: archival,
    states: ['ARCHIVING', 'WRITING_TO_R2', 'COMPLETED', 'ERROR', 'RETRYING'],
    withState: true,
    everyProcess: true,
    effects: (view, context): EffectsByKey<typeof archival> => {
      if (view.stream !== archiveRun || archiveSnapshot === undefined) return {};
      const { scheduler } = context;
      const take$ = defer(async () => {
        toArchive = await metrics.snapshot(scheduler.now());
      }).pipe(ignoreElements());
      return archivalRunEffects(view, context, {
        serialize: () => take$,
        write: () =>
          defer(async (): Promise<ArchivalRunOutput> => {
            // Resumed after a restart: the snapshot died with the old process; a fresh one goes instead.
            toArchive ??= await metrics.snapshot(scheduler.now());
            await archiveSnapshot(toArchive);
            return { type: 'write_succeeded' };
          }).pipe(catchError((error: unknown) => of<ArchivalRunOutput>({ type: 'write_failed', error: errorText(error) }))),
        retryDelayMs: (attempts) => backoffDelay(attempts, backoff, random),
        completed: () =>
          context.snapshot(stream, metricsCollector).pipe(
            take(1),
            mergeMap((collector) => {
              toArchive = undefined;
              const done: ArchivalRunOutput[] = collector?.state.value === 'ARCHIVING' ? [{ stream, event: { type: 'archive_done' } }] : [];
              return from([...done, { type: 'reset' } as const]);
            }),
          ),
        resolutionMs: 1,
      });
    },
  });

  const lifecycle = stateEffects({
    name: 'metricsCollector',
    machine: metricsCollector,
    states: ['INITIALIZING', 'RUNNING', 'ERROR', 'RECOVERING', 'ARCHIVING'],
    everyProcess: true,
    effects,
  });
  // Spawned at start; a collector already in the log is left as it is and resumed from its state.
  const epic: Epic = (runes$, context, deps) =>
    merge(of<EpicCommand>({ stream, spawn: metricsCollector.id }), lifecycle(runes$, context, deps), archiveRuns(runes$, context, deps));
  Object.defineProperty(epic, 'name', { value: 'metricsCollector' });
  return epic;
}
