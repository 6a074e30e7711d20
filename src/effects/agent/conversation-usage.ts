import { type Observable, defer, filter, map, merge, mergeMap, reduce } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import { NO_USAGE, addUsage, type Usage } from '../../reducers/budget.js';
import type { ConversationState } from '../../reducers/conversation/schema.js';
import { reactAgent } from '../../reducers/react-agent/machine.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import type { AgentStreams } from '../../reducers/stream-ids.js';
import type { EpicContext } from '../../streams/epic.js';
import { stateOf } from './state-of.js';
import { agentOfReact, agentOfTurn } from './streams.js';
import { reactTurnUsageAt } from './turn-usage.js';

/** The states of a turn that is running: what it has used is its own until it ends. */
const RUNNING: readonly string[] = ['streaming', 'tool_executing'];

/**
 * What the running turn of a ReAct agent (a model call of its loop, see `reactAgentLifecycle`)
 * has used so far: the rounds its call has had answered (`reactTurnUsageAt`), none if it runs none.
 */
export async function reactTurnUsageNow(agent: AgentStreams, context: EpicContext): Promise<Usage> {
  const lifecycle = await stateOf(context, agent.lifecycle, agentLifecycle);
  if (lifecycle?.value !== 'running_turn') return NO_USAGE;
  return reactTurnUsageAt(agent.react, lifecycle.turnId, context.scheduler.now(), context);
}

/**
 * What a conversation (`root`, its state `talk`) has used by now: its `usage` (what its ended
 * turns brought it, on their `turn_completed`) plus what each turn of its agents still running
 * has used so far: a turn-based agent's turn, or a ReAct agent's model call (the rounds it had
 * answered, by this process or by one that died mid-call). A turn's answered model calls reach
 * the conversation only when it ends, and a turn waiting on its tools (or on a sub-agent's turn)
 * may run long after the limit is reached. An Observable of one value: a context that answers at
 * once decides in the frame that asked.
 */
export const conversationUsageNow$ = (root: string, talk: ConversationState, context: EpicContext): Observable<Usage> =>
  merge(
    context.streams({ prefix: `${root}/agent/`, machine: turnEngine.id }).pipe(
      filter((head) => agentOfTurn(head.stream)?.root === root),
      mergeMap((head) => context.snapshot(head.stream, turnEngine)),
      map((turn) => (turn !== undefined && RUNNING.includes(turn.state.value) ? turn.state.turnUsage : NO_USAGE)),
    ),
    context.streams({ prefix: `${root}/agent/`, machine: reactAgent.id }).pipe(
      map((head) => agentOfReact(head.stream)),
      filter((agent): agent is AgentStreams => agent?.root === root),
      mergeMap((agent) => defer(() => reactTurnUsageNow(agent, context))),
    ),
  ).pipe(reduce((used, running) => addUsage(used, running), talk.usage));
