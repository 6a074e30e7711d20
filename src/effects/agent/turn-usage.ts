import { lastValueFrom, toArray } from 'rxjs';
import type { Usage } from '../../reducers/budget.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import type { TurnEngineState } from '../../reducers/turn-engine/schema.js';
import type { EpicContext } from '../../streams/epic.js';
import { ofMachine } from '../../streams/of-machine.js';

/** When a turn stream's current (or last) turn started: the `at` of its last `turn.started` rune. */
export async function turnStartedAt(turn: string, context: EpicContext): Promise<number | undefined> {
  const runes = await lastValueFrom(context.read(turn).pipe(ofMachine(turnEngine), toArray()));
  for (let i = runes.length - 1; i >= 0; i--) if (runes[i]!.event.type === 'start_turn') return runes[i]!.at;
  return undefined;
}

/**
 * What a turn used by `at` (its end, or now): its responses' usage as its state sums it, and its
 * wall clock, from its `turn.started` rune to `at`.
 */
export async function turnUsageAt(turn: string, state: TurnEngineState, at: number, context: EpicContext): Promise<Usage> {
  const startedAt = await turnStartedAt(turn, context);
  return { ...state.turnUsage, wallClockMs: startedAt === undefined ? 0 : Math.max(0, at - startedAt) };
}
