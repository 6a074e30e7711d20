import { z } from 'zod';
import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { MetricsCollectorEvent, MetricsCollectorState, MetricsCollectorStateName } from './schema.js';

type S = MetricsCollectorState;
type E = MetricsCollectorEvent;

/** A failure keeps what went wrong; one that says nothing keeps the error already known. */
const failed = (s: S, e: { error?: string }): Partial<S> => ({ error: e.error ?? s.error });

/** Seed 002 section 5, edge for edge. */
const table: readonly Row<S, E>[] = [
  { from: 'INITIALIZING', on: 'initialized', to: 'RUNNING' },
  { from: 'INITIALIZING', on: 'binding_missing', to: 'ERROR', assign: failed },
  { from: 'RUNNING', on: 'runtime_error', to: 'ERROR', assign: failed },
  { from: 'ERROR', on: 'retry', to: 'RECOVERING' },
  { from: 'RECOVERING', on: 'recovered', to: 'RUNNING', assign: () => ({ error: undefined }) },
  { from: 'RUNNING', on: 'archive_triggered', to: 'ARCHIVING' },
  {
    from: 'ARCHIVING',
    on: 'archive_done',
    to: 'RUNNING',
    source: 'design',
    note: 'the seed draws no way out of ARCHIVING; the collector resumes once the archival run ends',
  },
  {
    from: 'RECOVERING',
    on: 'runtime_error',
    to: 'ERROR',
    assign: failed,
    source: 'extension',
    note: 'a recovery that fails must not hang in RECOVERING',
  },
];

/**
 * The metrics collector (seed 002): initialises its KV binding, runs, hands long-term storage to
 * the archival service on schedule, and recovers from errors by retrying.
 *
 * @example
 * ```ts
 * import { metricsCollector } from 'runestream';
 * let s = metricsCollector.initial();                                         // { value: 'INITIALIZING' }
 * s = metricsCollector.transition(s, { type: 'binding_missing', error: 'METRICS_KV not bound' });
 * s = metricsCollector.transition(s, { type: 'retry' });                      // RECOVERING
 * console.log(s.error);                                                       // Logs: METRICS_KV not bound
 * console.log(metricsCollector.transition(s, { type: 'recovered' }).value);   // Logs: RUNNING
 * ```
 */
export const metricsCollector = defineMachine<S, E>({
  id: 'metrics-collector',
  states: MetricsCollectorStateName.options,
  terminal: [],
  events: eventTypesOf(MetricsCollectorEvent),
  schemas: { state: MetricsCollectorState, event: MetricsCollectorEvent, input: z.void() },
  initial: () => ({ value: 'INITIALIZING' }),
  table,
});
