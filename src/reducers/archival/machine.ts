import { z } from 'zod';
import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { ArchivalEvent, ArchivalState, ArchivalStateName } from './schema.js';

type S = ArchivalState;
type E = ArchivalEvent;

/** Entering WRITING_TO_R2 starts one more write. */
const writeStarted = (s: S): Partial<S> => ({ attempts: s.attempts + 1 });
const writeFailed = (s: S, e: Extract<E, { type: 'write_failed' }>): Partial<S> => ({ error: e.error ?? s.error });

/** Seed 002 section 6, edge for edge. */
const table: readonly Row<S, E>[] = [
  { from: 'IDLE', on: 'start', to: 'ARCHIVING', assign: () => ({ attempts: 0, error: undefined }) },
  { from: 'ARCHIVING', on: 'serialized', to: 'WRITING_TO_R2', assign: writeStarted },
  { from: 'WRITING_TO_R2', on: 'write_succeeded', to: 'COMPLETED' },
  { from: 'WRITING_TO_R2', on: 'write_failed', to: 'ERROR', assign: writeFailed },
  { from: 'ERROR', on: 'retry', to: 'RETRYING' },
  { from: 'RETRYING', on: 'rewrite', to: 'WRITING_TO_R2', assign: writeStarted },
  { from: 'COMPLETED', on: 'reset', to: 'IDLE' },
  {
    from: 'ARCHIVING',
    on: 'write_failed',
    to: 'ERROR',
    assign: writeFailed,
    source: 'extension',
    note: 'the seed\'s "serialize & write" is one step: a snapshot that cannot be serialized fails the run like a write, instead of leaving it in ARCHIVING where every later start is rejected',
  },
];

/**
 * An archival run (seed 002): snapshot the metrics, write them to R2, and retry a failed write
 * with backoff until it succeeds. `attempts` counts the writes tried in the current run.
 *
 * @example
 * ```ts
 * import { archival } from 'runestream';
 * let s = archival.initial();                                              // { value: 'IDLE', attempts: 0 }
 * s = archival.transition(s, { type: 'start' });                           // ARCHIVING
 * s = archival.transition(s, { type: 'serialized' });                      // WRITING_TO_R2, attempts 1
 * s = archival.transition(s, { type: 'write_failed', error: '503 from R2' });
 * s = archival.transition(archival.transition(s, { type: 'retry' }), { type: 'rewrite' });
 * console.log([s.value, s.attempts, s.error]);                             // Logs: [ 'WRITING_TO_R2', 2, '503 from R2' ]
 * ```
 */
export const archival = defineMachine<S, E>({
  id: 'archival',
  states: ArchivalStateName.options,
  terminal: [],
  events: eventTypesOf(ArchivalEvent),
  schemas: { state: ArchivalState, event: ArchivalEvent, input: z.void() },
  initial: () => ({ value: 'IDLE', attempts: 0 }),
  table,
});
