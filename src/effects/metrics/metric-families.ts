import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** Latency buckets (seconds) of work that takes microseconds to a second: dispatch, store append, hydration. */
const FAST_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** Buckets (seconds) of a model's time to its first delta. */
const MODEL_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Buckets (seconds) of a person's answer to an approval request. */
const APPROVAL_BUCKETS = [1, 5, 15, 30, 60, 300, 900, 3600, 14_400];

/** What the families read when scraped: counts kept off the hot path, and the engine's size. */
export interface ScrapeHooks {
  /** Adds the runes counted since the last scrape to the counter. */
  runesAppended(counter: Counter<'machine' | 'kind'>): void;
  /** Instances in memory now. */
  instances(): number;
}

/**
 * The engine's and the agents' metric families, registered on `registry`. Names follow the
 * Prometheus conventions: the unit in the name, `_total` on counters. No label holds a stream id.
 */
export function engineMetricFamilies(registry: Registry, atScrape: ScrapeHooks) {
  const registers = [registry];
  return {
    runesAppended: new Counter({
      name: 'runestream_runes_appended_total',
      help: 'Runes appended to the log and published, by machine and rune kind.',
      labelNames: ['machine', 'kind'] as const,
      registers,
      collect() {
        atScrape.runesAppended(this);
      },
    }),
    instances: new Gauge({
      name: 'runestream_instances_in_memory',
      help: 'Machine instances the engine holds in memory.',
      registers,
      collect() {
        this.set(atScrape.instances());
      },
    }),
    dispatchDuration: new Histogram({
      name: 'runestream_dispatch_duration_seconds',
      help: 'Time from an accepted dispatch to its rune being durable, by machine; one dispatch in 64 is timed.',
      labelNames: ['machine'] as const,
      buckets: FAST_BUCKETS,
      registers,
    }),
    dispatchRejections: new Counter({
      name: 'runestream_dispatch_rejections_total',
      help: 'Dispatches refused by the engine (nothing appended), by rejection code.',
      labelNames: ['code'] as const,
      registers,
    }),
    hydrationDuration: new Histogram({
      name: 'runestream_hydration_duration_seconds',
      help: 'Streams read back from the store into memory and how long each took, by machine.',
      labelNames: ['machine'] as const,
      buckets: FAST_BUCKETS,
      registers,
    }),
    appendDuration: new Histogram({
      name: 'runestream_store_append_duration_seconds',
      help: 'Time of each append to the store (a batch; one in 64 of the single-rune appends of the memory store).',
      buckets: FAST_BUCKETS,
      registers,
    }),
    modelCalls: new Counter({
      name: 'runestream_model_calls_total',
      help: 'Model calls by provider and outcome (success, failure), each provider a chain tried, in this process.',
      labelNames: ['provider', 'outcome'] as const,
      registers,
    }),
    modelFirstDelta: new Histogram({
      name: 'runestream_model_first_delta_seconds',
      help: "Time from a turn's model call to its first streamed delta.",
      buckets: MODEL_BUCKETS,
      registers,
    }),
    modelTokens: new Counter({
      name: 'runestream_model_tokens_total',
      help: 'Tokens the models reported, by model and direction (input, output).',
      labelNames: ['model', 'direction'] as const,
      registers,
    }),
    toolExecutions: new Counter({
      name: 'runestream_tool_executions_total',
      help: 'Tool calls ended, by tool and status (success, error, timeout, cancelled, denied).',
      labelNames: ['tool', 'status'] as const,
      registers,
    }),
    approvalWait: new Histogram({
      name: 'runestream_tool_approval_wait_seconds',
      help: 'Time a tool call waited for its approval or denial.',
      buckets: APPROVAL_BUCKETS,
      registers,
    }),
    breakerState: new Gauge({
      name: 'runestream_breaker_state',
      help: "Each provider's circuit breaker: 1 for its current state (CLOSED, OPEN, HALF_OPEN), 0 for the others.",
      labelNames: ['provider', 'state'] as const,
      registers,
    }),
    epicFailures: new Counter({
      name: 'runestream_epic_failures_total',
      help: 'Epics that failed (and were resubscribed) and effects that failed, by epic and type (epic_failed, effect_failed).',
      labelNames: ['epic', 'type'] as const,
      registers,
    }),
  };
}

export type EngineMetricFamilies = ReturnType<typeof engineMetricFamilies>;
