import { type Observable, defer, filter, map, merge, mergeMap, reduce } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import { NO_USAGE, addUsage, type Usage } from '../../reducers/budget.js';
import { reactAgent } from '../../reducers/react-agent/machine.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import type { AgentStreams } from '../../reducers/stream-ids.js';
import type { EpicContext } from '../../streams/epic.js';
import { stateOf } from './state-of.js';
import { agentOfLifecycle, agentOfReact, agentOfTurn } from './streams.js';
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
 * What a conversation (`root`) has used in its ended turns: the sum of its agents' usage (each
 * agent's lifecycle adds up its turns as they end). Its own state's `usage` is what the
 * `turn_completed` runes of older logs summed, the same turns' usage: not added again. An
 * Observable of one value, as {@link conversationUsageNow$}.
 */
export const conversationUsage$ = (root: string, context: EpicContext): Observable<Usage> =>
  context.streams({ prefix: `${root}/agent/`, machine: agentLifecycle.id }).pipe(
    filter((head) => agentOfLifecycle(head.stream)?.root === root),
    mergeMap((head) => context.snapshot(head.stream, agentLifecycle)),
    reduce((used, lifecycle) => (lifecycle === undefined ? used : addUsage(used, lifecycle.state.usage)), NO_USAGE),
  );

/**
 * What a conversation (`root`) has used by now: what its ended turns used
 * ({@link conversationUsage$}) plus what each turn of its agents still running has used so far: a
 * turn-based agent's turn, or a ReAct agent's model call (the rounds it had answered, by this
 * process or by one that died mid-call). A turn's answered model calls reach its agent only when
 * it ends, and a turn waiting on its tools (or on a sub-agent's turn) may run long after the
 * limit is reached. An Observable of one value: a context that answers at once decides in the
 * frame that asked.
 */
export const conversationUsageNow$ = (root: string, context: EpicContext): Observable<Usage> =>
  merge(
    conversationUsage$(root, context),
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
  ).pipe(reduce((used, running) => addUsage(used, running), NO_USAGE));
