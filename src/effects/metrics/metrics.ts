import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { Registry } from 'prom-client';
import { ENGINE_CHANNELS, type DispatchReport, type HydrationReport, type RejectionReport, type StoreAppendReport } from '../../streams/diagnostics.js';
import type { Engine } from '../../streams/engine.js';
import type { RuneStore } from '../../streams/store.js';
import { DEFAULT_MAX_LABEL_LENGTH, DEFAULT_MAX_LABEL_VALUES, boundedLabel } from './bounded-labels.js';
import { engineMetricFamilies, type EngineMetricFamilies } from './metric-families.js';
import type { MetricsSnapshot } from './metrics-sink.js';
import { RuneMetrics } from './rune-metrics.js';
import { circuitBreaker } from '../../reducers/circuit-breaker/machine.js';
import { MODEL_CALL_CHANNEL, type ModelCallReport } from '../llm/model-call-channel.js';
import { providerBreakerStream } from '../llm/provider-chain.js';

/** Options of {@link createMetrics}, each with its default. */
export interface MetricsOptions {
  /**
   * The distinct values kept per label (machine, kind, code, tool, provider, model, epic,
   * ...): past it, a new value is counted as `"other"`. Default 200.
   */
  maxLabelValues?: number;
  /**
   * The characters kept of one label value (a tool, model or provider name, ...): a longer one is
   * cut to this, its start then `…` and 8 hex digits of a hash of the whole value, so two long
   * names stay two series. At least 16. Default 128.
   */
  maxLabelLength?: number;
  /** The streams tracked at once for time to first delta, approval wait and a call's tool. Default 100,000. */
  maxTracked?: number;
}

/** Options of {@link RunestreamMetrics.observe}. */
export interface ObserveOptions {
  /** The engine's store: the stored breakers' states are read from its heads. Default: none (no stored states). */
  readonly store?: Pick<RuneStore, 'heads'>;
}

/** The engine's metrics on a registry of their own (never prom-client's global one). */
export interface RunestreamMetrics {
  /** The prom-client registry every family is on: `registry.metrics()` is the Prometheus text. */
  readonly registry: Registry;
  /** A label function capped at `maxLabelValues` distinct values of `maxLabelLength` characters, for families added beside these (the server's). */
  boundedLabel(): (value: string) => string;
  /**
   * Starts counting: the engine and store channels (see `ENGINE_CHANNELS`: they are the
   * process's, so what every engine of the process does is counted), `engine`'s size and its
   * epics' failures (`errors$`). Returns the function that stops it. One engine at a time.
   * Given the engine's `store`, `runestream_breaker_state` starts from each stored provider
   * breaker's state (read from its head), so a restarted process shows them before any new
   * breaker rune; without it, a breaker has a series from its first live rune on.
   */
  observe(engine: Engine, options?: ObserveOptions): () => void;
  /** Every family now, as JSON, stamped `at` (ms): what the collector writes to its sink. */
  snapshot(at: number): Promise<MetricsSnapshot>;
}

/** The shortest `maxLabelLength`: a cut value keeps a few characters besides `…` and its 8-digit hash. */
const MIN_LABEL_LENGTH = 16;

const positiveInteger = (name: string, value: number): number => {
  if (!Number.isInteger(value) || value <= 0) throw new TypeError(`createMetrics: "${name}" must be a positive integer, got ${String(value)}`);
  return value;
};

/**
 * Creates the engine's metrics: counters, gauges and histograms on their own prom-client
 * `Registry`, fed by the engine's diagnostics channels and its live runes once {@link
 * RunestreamMetrics.observe} is called. While nothing observes, the engine measures nothing.
 *
 * ## Example
 * ```ts
 * import { createEngine } from 'runestream';
 * import { createMetrics } from 'runestream/server';
 * const metrics = createMetrics();
 * const engine = createEngine();
 * const stop = metrics.observe(engine);
 * await engine.spawn('chat-1', 'chat-actor');
 * const text = await metrics.registry.metrics();
 * console.log(text.includes('runestream_runes_appended_total{machine="chat-actor",kind="spawned"} 1')); // Logs: true
 * stop();
 * await engine.close();
 * ```
 */
export function createMetrics(options: MetricsOptions = {}): RunestreamMetrics {
  const maxLabelValues = positiveInteger('maxLabelValues', options.maxLabelValues ?? DEFAULT_MAX_LABEL_VALUES);
  const maxTracked = positiveInteger('maxTracked', options.maxTracked ?? 100_000);
  const maxLabelLength = positiveInteger('maxLabelLength', options.maxLabelLength ?? DEFAULT_MAX_LABEL_LENGTH);
  if (maxLabelLength < MIN_LABEL_LENGTH) throw new TypeError(`createMetrics: "maxLabelLength" must be at least ${MIN_LABEL_LENGTH} (room for a hash), got ${maxLabelLength}`);
  const label = (): ((value: string) => string) => boundedLabel(maxLabelValues, maxLabelLength);
  const registry = new Registry();
  const labels = { machine: label(), runeLabel: label(), code: label(), epic: label(), provider: label() };
  let runes: RuneMetrics | undefined;
  let engine: Engine | undefined;
  const families: EngineMetricFamilies = engineMetricFamilies(registry, {
    runesAppended: (counter) => runes?.flushRunes(counter, labels.runeLabel),
    instances: () => engine?.size ?? 0,
  });
  runes = new RuneMetrics(families, { tool: label(), provider: labels.provider, model: label() }, maxTracked);

  const onDispatch = (message: unknown): void => {
    const { machine, ms } = message as DispatchReport;
    families.dispatchDuration.observe({ machine: labels.machine(machine) }, ms / 1000);
  };
  const onRejection = (message: unknown): void => {
    families.dispatchRejections.inc({ code: labels.code((message as RejectionReport).code) });
  };
  const onHydration = (message: unknown): void => {
    const { machine, ms } = message as HydrationReport;
    families.hydrationDuration.observe({ machine: labels.machine(machine) }, ms / 1000);
  };
  const onAppend = (message: unknown): void => {
    families.appendDuration.observe((message as StoreAppendReport).ms / 1000);
  };
  const onModelCall = (message: unknown): void => {
    const { provider, outcome } = message as ModelCallReport;
    families.modelCalls.inc({ provider: labels.provider(provider), outcome });
  };

  return {
    registry,
    boundedLabel: label,
    observe: (observed, { store } = {}) => {
      if (engine !== undefined) throw new TypeError('createMetrics: observe() already watches an engine; stop it first');
      engine = observed;
      const take = runes!.take as (message: unknown) => void;
      const errors = observed.errors$.subscribe((error) => {
        if (error.type === 'epic_failed' || error.type === 'effect_failed') families.epicFailures.inc({ epic: labels.epic(error.epic), type: error.type });
      });
      subscribe(ENGINE_CHANNELS.rune, take);
      subscribe(ENGINE_CHANNELS.dispatch, onDispatch);
      subscribe(ENGINE_CHANNELS.rejection, onRejection);
      subscribe(ENGINE_CHANNELS.hydration, onHydration);
      subscribe(ENGINE_CHANNELS.append, onAppend);
      subscribe(MODEL_CALL_CHANNEL, onModelCall);
      let stopped = false;
      // After the live runes are heard, so a breaker one moves meanwhile keeps that rune's state.
      if (store !== undefined) {
        const restore = async (): Promise<void> => {
          for await (const head of store.heads({ machine: circuitBreaker.id, prefix: providerBreakerStream('') })) {
            if (stopped) return;
            runes!.restoreBreakers([head]);
          }
        };
        // A store that cannot list its heads: the series come with the next runes.
        restore().catch(() => {});
      }
      return () => {
        if (stopped) return;
        stopped = true;
        unsubscribe(ENGINE_CHANNELS.rune, take);
        errors.unsubscribe();
        unsubscribe(ENGINE_CHANNELS.dispatch, onDispatch);
        unsubscribe(ENGINE_CHANNELS.rejection, onRejection);
        unsubscribe(ENGINE_CHANNELS.hydration, onHydration);
        unsubscribe(ENGINE_CHANNELS.append, onAppend);
        unsubscribe(MODEL_CALL_CHANNEL, onModelCall);
        engine = undefined;
      };
    },
    snapshot: async (at) => ({ at, metrics: await registry.getMetricsAsJSON() }),
  };
}
