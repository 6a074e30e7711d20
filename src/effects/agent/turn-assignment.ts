import { type Observable, defer, filter, first, map, merge } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import type { AgentStreams } from '../../reducers/stream-ids.js';
import type { Rune } from '../../reducers/rune.js';
import type { TurnEngineState } from '../../reducers/turn-engine/schema.js';
import type { EpicContext } from '../../streams/epic.js';
import { stateOf } from './state-of.js';

/** The id a turn is assigned to its agent under (`turn_assigned`): its number, or the seq of its `start_turn` rune. */
export const assignedTurnId = (turn: TurnEngineState | undefined, startSeq: number): string => String(turn?.turn ?? startSeq);

/**
 * Emits once (then completes) when `agent`'s lifecycle runs the turn `turnId`: heard live (a rune
 * of `runes$` entering `running_turn` with it) or found in its stored state. What `agentTurns`
 * decided for a turn that started: it assigns the turn, or interrupts it instead (never both).
 */
export function turnAssigned$(agent: AgentStreams, turnId: string, runes$: Observable<Rune>, context: EpicContext): Observable<void> {
  const running = (value: string | undefined, assigned: unknown): boolean => value === 'running_turn' && assigned === turnId;
  return merge(
    runes$.pipe(filter((rune) => rune.stream === agent.lifecycle && running(rune.to, (rune.event as { turnId?: unknown }).turnId))),
    defer(() => stateOf(context, agent.lifecycle, agentLifecycle)).pipe(filter((state) => running(state?.value, state?.turnId))),
  ).pipe(
    first(),
    map(() => undefined),
  );
}
