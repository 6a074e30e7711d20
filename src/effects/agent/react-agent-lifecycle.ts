import { concatMap, defer, filter, groupBy, ignoreElements, merge, mergeMap, tap, type Observable } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import { reactAgent } from '../../reducers/react-agent/machine.js';
import type { AgentState } from '../../reducers/react-agent/state.js';
import { SPAWN_EVENT_TYPE, type Rune } from '../../reducers/rune.js';
import { agentStreams, parseStreamId, type AgentStreams } from '../../reducers/stream-ids.js';
import type { Epic, EpicCommand, EpicContext } from '../../streams/epic.js';
import { agentCompanions, type AgentAdmission } from './agent-companions.js';
import { stateOf } from './state-of.js';

/** The agent whose ReAct stream (`<root>/agent/<a>/react`) is `stream`, or undefined for any other stream. */
function agentOfReact(stream: string): AgentStreams | undefined {
  const parts = parseStreamId(stream);
  return parts?.kind === 'react' ? agentStreams(parts.root, parts.agentId) : undefined;
}

/**
 * The lifecycle step a ReAct agent's state calls for: a loop in progress (`reActContext` set) is
 * the agent's running turn, a loop at rest an idle agent. Decided from the durable states alone,
 * so it is the same after a restart.
 */
async function reconciled(agent: AgentStreams, rune: Rune, context: EpicContext, pending: Map<string, 'idle' | 'running_turn'>): Promise<EpicCommand[]> {
  const state = await stateOf(context, agent.react, reactAgent);
  const lifecycle = await stateOf(context, agent.lifecycle, agentLifecycle);
  if (state === undefined || lifecycle === undefined) return [];
  if (agentLifecycle.terminal.includes(lifecycle.value)) {
    pending.delete(agent.lifecycle); // terminated (its conversation closed) or failed: it runs no turn
    return [];
  }
  const busy = (state as AgentState).reActContext !== null;
  // A step sent and not yet applied counts as done: the lifecycle's durable state lags it.
  const now = pending.get(agent.lifecycle) ?? lifecycle.value;
  if (busy && now === 'idle') {
    pending.set(agent.lifecycle, 'running_turn');
    return [
      { stream: agent.root, event: { type: 'new_turn' } },
      { stream: agent.lifecycle, event: { type: 'turn_assigned', turnId: `react-${rune.seq}` } },
    ];
  }
  if (!busy && now === 'running_turn') {
    pending.set(agent.lifecycle, 'idle');
    return [
      { stream: agent.lifecycle, event: { type: 'turn_completed' } },
      { stream: agent.root, event: { type: 'turn_completed' } },
    ];
  }
  return [];
}

/**
 * Gives every ReAct agent (seed 004) the seed-003 companions a turn-based agent has, so a
 * conversation sees both kinds alike:
 *
 * 1. Its ReAct stream spawned: its `agentLifecycle` stream (ready at once) and, if none is there
 *    yet, its conversation, with it as the root agent.
 * 2. Each ReAct loop is a turn: when a loop starts (a user message to respond to) the agent runs a
 *    turn (`turn_assigned`) and the conversation counts it (`new_turn`); when the loop comes to
 *    rest the turn completes.
 *
 * Part of `reactAgentEpics`. A terminated agent (its conversation closed) refuses new turns. With
 * `admission`, an agent whose role it refuses gets `init_error` saying why instead of starting.
 */
export function reactAgentLifecycle(admission?: AgentAdmission): Epic {
  return function reactAgentLifecycle(runes$, context) {
    // Per lifecycle stream, the state its last step sent will put it in, until its rune says so.
    const pending = new Map<string, 'idle' | 'running_turn'>();
    const onRune = (rune: Rune): Observable<EpicCommand> => {
      const agent = agentOfReact(rune.stream)!;
      const step = rune.event.type === SPAWN_EVENT_TYPE ? () => agentCompanions(agent, context, undefined, admission) : () => reconciled(agent, rune, context, pending);
      return defer(step).pipe(mergeMap((commands) => commands));
    };
    const atRest = (stream: string): boolean => context.state<AgentState>(stream)?.reActContext === null;
    // Per agent, one rune at a time, so its lifecycle steps keep their order; agents side by side.
    // An agent's group ends when its loop is at rest, so idle agents hold nothing here.
    const applied$ = runes$.pipe(
      filter((rune) => rune.machine === agentLifecycle.id && pending.get(rune.stream) === rune.to),
      tap((rune) => pending.delete(rune.stream)),
      ignoreElements(),
    );
    const steps$ = runes$.pipe(
      filter((rune) => rune.machine === reactAgent.id && agentOfReact(rune.stream) !== undefined),
      groupBy((rune) => rune.stream, { duration: (group$) => group$.pipe(filter((rune) => rune.event.type !== SPAWN_EVENT_TYPE && atRest(rune.stream))) }),
      mergeMap((group$) => group$.pipe(concatMap(onRune))),
    );
    return merge(applied$, steps$);
  };
}
