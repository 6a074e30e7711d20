import { type Observable, filter, first, map, merge } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import type { AgentStreams } from '../../reducers/stream-ids.js';
import type { Rune } from '../../reducers/rune.js';
import type { TurnEngineState } from '../../reducers/turn-engine/schema.js';
import type { EpicContext } from '../../streams/epic.js';

/** The id a turn is assigned to its agent under (`turn_assigned`): its number, or the seq of its `start_turn` rune. */
export const assignedTurnId = (turn: TurnEngineState | undefined, startSeq: number): string => String(turn?.turn ?? startSeq);

/**
 * Emits once (then completes) when `agent`'s lifecycle runs the turn `turnId`: heard live (a rune
 * of `runes$` entering `running_turn` with it) or found in its stored state. What `agentTurns`
 * decided for a turn that started: it assigns the turn, or interrupts it instead (never both).
 * Observables all the way: with a context that answers at once (a test's), it decides in the
 * frame of the rune that says so.
 */
export function turnAssigned$(agent: AgentStreams, turnId: string, runes$: Observable<Rune>, context: EpicContext): Observable<void> {
  const running = (value: string | undefined, assigned: unknown): boolean => value === 'running_turn' && assigned === turnId;
  return merge(
    runes$.pipe(filter((rune) => rune.stream === agent.lifecycle && running(rune.to, (rune.event as { turnId?: unknown }).turnId))),
    context.snapshot(agent.lifecycle, agentLifecycle).pipe(filter((snapshot) => running(snapshot?.state.value, snapshot?.state.turnId))),
  ).pipe(
    first(),
    map(() => undefined),
  );
}
