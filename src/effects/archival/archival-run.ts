import { EMPTY, Observable, concat, of } from 'rxjs';
import type { archival } from '../../reducers/archival/machine.js';
import type { ArchivalEvent } from '../../reducers/archival/schema.js';
import { durableDeadline } from '../../streams/durable-deadline.js';
import type { EpicCommand, EpicContext } from '../../streams/epic.js';
import type { EffectsByKey, StreamView } from '../../streams/state-effects.js';

/** What an archival run's effects emit: its own events, or commands to other streams. */
export type ArchivalRunOutput = ArchivalEvent | EpicCommand;

/** What one kind of archival run does at its steps; {@link archivalRunEffects} drives the rest. */
export interface ArchivalRunSteps {
  /** ARCHIVING: what to do before `serialized` (take what is written). Default: nothing. */
  readonly serialize?: () => Observable<never>;
  /** WRITING_TO_R2: write number `attempts` (1 for the first); emits `write_succeeded` or `write_failed`. */
  write(attempts: number): Observable<ArchivalRunOutput>;
  /** ERROR: the wait before retrying, after `attempts` writes failed in this run. */
  retryDelayMs(attempts: number): number;
  /** COMPLETED: what follows a written run, ending with `reset`. */
  completed(): Observable<ArchivalRunOutput>;
  /** How late the retry may fire: the bucket of its durable deadline's timer wheel. */
  readonly resolutionMs: number;
}

const SERIALIZED = { type: 'serialized' } as const;
const RETRY = { type: 'retry' } as const;
const REWRITE = { type: 'rewrite' } as const;

/**
 * The effects of an archival run (seed 002's ArchivalService) in its state, for `stateEffects`
 * over the `archival` machine (with `withState`: the retry's wait counts the run's `attempts`):
 *
 * 1. ARCHIVING: `serialize`, then `serialized`.
 * 2. WRITING_TO_R2: the write, which ends in `write_succeeded` (-> COMPLETED) or `write_failed` (-> ERROR).
 * 3. ERROR: `retry` after `retryDelayMs(attempts)`, a durable deadline from the failure's rune: a
 *    restart waits only what is left. RETRYING: `rewrite` (-> WRITING_TO_R2).
 * 4. COMPLETED: `completed`, which resets the run (-> IDLE).
 *
 * The one path every archival run takes, whatever it writes: the hot log's streams to the cold
 * store (`archivalEpic`), the metrics collector's snapshots (`metricsCollectorEpic`).
 */
export function archivalRunEffects(view: StreamView<typeof archival>, context: EpicContext, steps: ArchivalRunSteps): EffectsByKey<typeof archival> {
  const attempts = view.state?.attempts ?? 0;
  switch (view.value) {
    case 'ARCHIVING':
      return { serialize: concat(steps.serialize?.() ?? EMPTY, of(SERIALIZED)) };
    case 'WRITING_TO_R2':
      return { [`write#${attempts}`]: steps.write(attempts) };
    case 'ERROR':
      return {
        [`retry#${attempts}`]: durableDeadline(view.at + steps.retryDelayMs(attempts), RETRY, { scheduler: context.scheduler, resolutionMs: steps.resolutionMs }),
      };
    case 'RETRYING':
      return { rewrite: of(REWRITE) };
    case 'COMPLETED':
      return { completed: steps.completed() };
    default:
      return {};
  }
}
