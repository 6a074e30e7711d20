import { defer, firstValueFrom, from, mergeMap } from 'rxjs';
import { conversation } from '../../reducers/conversation/machine.js';
import { DEFAULT_ERROR_THRESHOLD, ErrorThreshold } from '../../reducers/conversation/schema.js';
import type { RuneOf } from '../../reducers/rune.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand } from '../../streams/epic.js';
import type { EffectsByKey } from '../../streams/state-effects.js';
import { checkedOption } from '../invalid-option.js';

/** Options of {@link conversationErrors}. */
export interface ConversationErrorsOptions {
  /**
   * How many turns of a conversation may end in error in a row before it is suspended
   * (`error_threshold`): an integer from 1 to 1,000. Default 5 (`DEFAULT_ERROR_THRESHOLD`).
   */
  readonly errorThreshold?: number;
}

/** The reason of the suspension: how many turns failed in a row, and the threshold. */
const errorReason = (errors: number, threshold: number): string => `${errors} turns in a row ended in error (errorThreshold ${threshold})`;

/** Whether a conversation's rune may have taken it to the threshold: a turn that ended in error, or a resume (errors counted while paused). */
const mayCross = (rune: RuneOf<typeof conversation> | undefined): boolean =>
  rune !== undefined && ((rune.event.type === 'turn_completed' && rune.event.outcome === 'error') || rune.event.type === 'resume_requested');

/**
 * The `errorThreshold` option checked: its value, or the default; out of range, an
 * `InvalidOptionError` (code `invalid_option`) naming it (see `checkedOption`).
 */
export function errorThresholdOf(value: unknown, who: string): number {
  return value === undefined ? DEFAULT_ERROR_THRESHOLD : checkedOption(ErrorThreshold, 'errorThreshold', value, who);
}

/**
 * Seed 003's `error_threshold`: a conversation whose turns ended in error `errorThreshold` times in
 * a row (its `consecutiveErrors`, counted from `turn_completed`'s `outcome`; a completed turn starts
 * the count again) is suspended, its reason saying how many; `agentTurns` then interrupts every
 * turn that starts there, with that reason, until an operator's `reset` (or `budget_replenished`).
 *
 * Decided from the conversation's state, so a crash between the last error and the suspension
 * suspends it once the stream is taken over again.
 */
export function conversationErrors(options: ConversationErrorsOptions = {}): Epic {
  const threshold = errorThresholdOf(options.errorThreshold, 'conversationErrors');
  return stateEffects({
    name: 'conversationErrors',
    machine: conversation,
    states: ['active'],
    effects: (view): EffectsByKey<typeof conversation> => {
      const check = defer(async (): Promise<EpicCommand[]> => {
        // Found in the store at start: only its last rune is read, and the state only if that rune may have crossed the line.
        if (!mayCross(view.rune ?? (await firstValueFrom(view.lastRune$)))) return [];
        const talk = await firstValueFrom(view.state$);
        const errors = talk?.consecutiveErrors ?? 0;
        return talk?.value === 'active' && errors >= threshold ? [{ stream: view.stream, event: { type: 'error_threshold', reason: errorReason(errors, threshold) } }] : [];
      });
      return { [`errors@${view.seq}`]: check.pipe(mergeMap((commands) => from(commands))) };
    },
  });
}
