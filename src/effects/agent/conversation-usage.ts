import { type Observable, filter, mergeMap, reduce } from 'rxjs';
import { addUsage, type Usage } from '../../reducers/budget.js';
import type { ConversationState } from '../../reducers/conversation/schema.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import type { EpicContext } from '../../streams/epic.js';
import { agentOfTurn } from './streams.js';

/** The states of a turn that is running: what it has used is its own until it ends. */
const RUNNING: readonly string[] = ['streaming', 'tool_executing'];

/**
 * What a conversation (`root`, its state `talk`) has used by now: its `usage` (what its ended
 * turns brought it, on their `turn_completed`) plus what each turn of its agents still running
 * has used so far. A turn's answered model calls reach the conversation only when it ends, and a
 * turn waiting on its tools (or on a sub-agent's turn) may run long after the limit is reached.
 * An Observable of one value: a context that answers at once decides in the frame that asked.
 */
export const conversationUsageNow$ = (root: string, talk: ConversationState, context: EpicContext): Observable<Usage> =>
  context.streams({ prefix: `${root}/agent/`, machine: turnEngine.id }).pipe(
    filter((head) => agentOfTurn(head.stream)?.root === root),
    mergeMap((head) => context.snapshot(head.stream, turnEngine)),
    reduce((used, turn) => (turn !== undefined && RUNNING.includes(turn.state.value) ? addUsage(used, turn.state.turnUsage) : used), talk.usage),
  );
