import { lastValueFrom, toArray } from 'rxjs';
import type { Usage } from '../../reducers/budget.js';
import type { RuneOf } from '../../reducers/rune.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import type { TurnEngineState } from '../../reducers/turn-engine/schema.js';
import type { EpicContext } from '../../streams/epic.js';
import { ofMachine } from '../../streams/of-machine.js';

/** When the last turn of these runes of a turn stream started: the `at` of the last `turn.started`. */
export function lastStartAt(runes: readonly RuneOf<typeof turnEngine>[]): number | undefined {
  for (let i = runes.length - 1; i >= 0; i--) if (runes[i]!.event.type === 'start_turn') return runes[i]!.at;
  return undefined;
}

/** When a turn stream's current (or last) turn started: the `at` of its last `turn.started` rune. */
export async function turnStartedAt(turn: string, context: EpicContext): Promise<number | undefined> {
  return lastStartAt(await lastValueFrom(context.read(turn).pipe(ofMachine(turnEngine), toArray())));
}

/**
 * What a turn used by `at` (its end, or now): its responses' usage as its state sums it, and its
 * wall clock, from its `turn.started` rune to `at`.
 */
export async function turnUsageAt(turn: string, state: TurnEngineState, at: number, context: EpicContext): Promise<Usage> {
  const startedAt = await turnStartedAt(turn, context);
  return { ...state.turnUsage, wallClockMs: startedAt === undefined ? 0 : Math.max(0, at - startedAt) };
}
