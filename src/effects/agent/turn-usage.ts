import { lastValueFrom, toArray } from 'rxjs';
import { NO_USAGE, addUsage, type Usage } from '../../reducers/budget.js';
import { reactAgent } from '../../reducers/react-agent/machine.js';
import type { RuneOf } from '../../reducers/rune.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import type { TurnEngineState } from '../../reducers/turn-engine/schema.js';
import type { EpicContext } from '../../streams/epic.js';
import { ofMachine } from '../../streams/of-machine.js';
import { turnRunes$ } from './turn-history.js';

/** When the last turn of these runes of a turn stream started before rune `beforeSeq`: the `at` of the last such `turn.started`. */
export function lastStartAt(runes: readonly RuneOf<typeof turnEngine>[], beforeSeq = Infinity): number | undefined {
  for (let i = runes.length - 1; i >= 0; i--) if (runes[i]!.seq < beforeSeq && runes[i]!.event.type === 'start_turn') return runes[i]!.at;
  return undefined;
}

/** When a turn stream's current (or last) turn started, or its last before rune `beforeSeq`: the `at` of that `turn.started` rune. */
export async function turnStartedAt(turn: string, context: EpicContext, beforeSeq?: number): Promise<number | undefined> {
  return lastStartAt(await lastValueFrom(turnRunes$(turn, context)), beforeSeq);
}

/** `used` with the wall clock of a turn that started at `startedAt` (none if unknown) and ended at `at`. */
const withWallClock = (used: Usage, startedAt: number | undefined, at: number): Usage => ({
  ...used,
  wallClockMs: startedAt === undefined ? 0 : Math.max(0, at - startedAt),
});

/**
 * What a turn used by `at` (its end, or now): its responses' usage as its state sums it, and its
 * wall clock, from its `turn.started` rune to `at` (`startedAt`, that rune's `at` if the caller
 * heard it, else read from the log).
 */
export async function turnUsageAt(turn: string, state: TurnEngineState, at: number, context: EpicContext, startedAt?: number): Promise<Usage> {
  return withWallClock(state.turnUsage, startedAt ?? (await turnStartedAt(turn, context)), at);
}

/**
 * What the turn that `ending` (its `turn.completed`, `turn.error` or `turn.interrupted`) ended
 * used: the usage its payload carries, and its wall clock from its `turn.started` (at `startedAt`
 * if the caller heard it, else read from the log before it). Read from the rune, not the stream's
 * state: the next turn may have started since. An ending stored before it carried its usage (its
 * turn rested in the ending state until finalized) is read from the turn's state.
 */
export async function endedTurnUsage(ending: RuneOf<typeof turnEngine>, context: EpicContext, startedAt?: number): Promise<Usage | undefined> {
  const carried = (ending.payload as { usage?: Usage } | undefined)?.usage;
  const start = startedAt ?? (await turnStartedAt(ending.stream, context, ending.seq));
  if (carried !== undefined) return withWallClock(carried, start, ending.at);
  const state = await lastValueFrom(context.snapshot(ending.stream, turnEngine), { defaultValue: undefined });
  return state === undefined ? undefined : withWallClock(state.state.turnUsage, start, ending.at);
}

/** The turn id of a ReAct agent's turn that the rune `seq` of its ReAct stream started. */
export const reactTurnId = (seq: number): string => `react-${seq}`;

/**
 * What a ReAct agent's turn `turnId` (see {@link reactTurnId}) used by `at`: the usage its model
 * call recorded, each answered round a response (on its `llm-round-answered` runes as they were
 * answered, by this process or one that died mid-call, and on its `re-act-observed`), and its wall
 * clock, from the rune that started it to `at`. The ReAct counterpart of {@link turnUsageAt}.
 */
export async function reactTurnUsageAt(react: string, turnId: string | undefined, at: number, context: EpicContext): Promise<Usage> {
  const start = /^react-(\d+)$/.exec(turnId ?? '')?.[1];
  if (start === undefined) return NO_USAGE;
  const runes = await lastValueFrom(context.read(react, Number(start) - 1).pipe(ofMachine(reactAgent), toArray()));
  let used = NO_USAGE;
  for (const { event } of runes) {
    if ((event.type === 're-act-observed' || event.type === 'llm-round-answered') && event.usage !== undefined) used = addUsage(used, event.usage);
  }
  return withWallClock(used, runes[0]?.at, at);
}
