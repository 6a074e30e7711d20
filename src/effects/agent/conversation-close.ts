import { EMPTY, Observable, concatMap, defer, filter, from, lastValueFrom, mergeMap, startWith, takeWhile, tap, toArray } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import { autonomyLoop } from '../../reducers/autonomy-loop/machine.js';
import type { AgentStats } from '../../reducers/agent-lifecycle/schema.js';
import { conversation } from '../../reducers/conversation/machine.js';
import { reactAgent } from '../../reducers/react-agent/machine.js';
import { atRest } from '../../reducers/resting-states.js';
import type { Rune } from '../../reducers/rune.js';
import { agentStreams, parseStreamId, type AgentStreams } from '../../reducers/stream-ids.js';
import { toolCall } from '../../reducers/tool-call/machine.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand, EpicContext } from '../../streams/epic.js';
import type { EffectsByKey } from '../../streams/state-effects.js';
import type { StreamHead } from '../../streams/store.js';
import { loopEnded } from './react-agent-effects.js';
import { conversationUsage$ } from './conversation-usage.js';
import { stateOf } from './state-of.js';

/** Why the turns of a closing conversation are interrupted and its open calls cancelled. */
export const CONVERSATION_CLOSING = 'conversation closing';

/** Turn states in which a turn is in flight: it is interrupted. */
const IN_FLIGHT = new Set(['streaming', 'tool_executing']);

/** Every head under `root`'s `kind` streams (`agent`, `plan`) of `machine`. */
const headsUnder = (context: EpicContext, root: string, machine: string, kind = 'agent'): Promise<StreamHead[]> =>
  lastValueFrom(context.streams({ prefix: `${root}/${kind}/`, machine }).pipe(toArray()));

/**
 * One look at a closing conversation: the commands that take it a step further (stop its open
 * plans, interrupt the turns in flight, end the ReAct loops still working, cancel calls left open,
 * terminate the agents that are idle), or, once every plan and loop has ended, every agent is terminated and every call terminal,
 * `cleanup_complete` with the final stats.
 * `asked` holds the turns asked to stop, the loops asked to end and the agents asked to end, so each is asked once.
 */
async function closeStep(root: string, context: EpicContext, asked: Set<string>): Promise<{ commands: EpicCommand[]; done: boolean }> {
  const [plans, lifecycles, turns, calls, loops] = await Promise.all([
    headsUnder(context, root, autonomyLoop.id, 'plan'),
    headsUnder(context, root, agentLifecycle.id),
    headsUnder(context, root, turnEngine.id),
    headsUnder(context, root, toolCall.id),
    headsUnder(context, root, reactAgent.id),
  ]);
  const turnOf = new Map(turns.map((head) => [head.stream, head]));
  const lifecycleOf = new Map(lifecycles.map((head) => [head.stream, head]));
  /** Whether an agent's turn is over: idle, and its agent told (a turn is idle with its ending rune, its agent told after). */
  const turnOver = (agent: AgentStreams): boolean => turnOf.get(agent.turn)?.value === 'idle' && lifecycleOf.get(agent.lifecycle)?.value !== 'running_turn';
  const loopOf = new Set(loops.map((head) => head.stream));
  const callsOf = new Map<string, StreamHead[]>();
  for (const call of calls) {
    const parts = parseStreamId(call.stream);
    if (parts?.kind !== 'call') continue;
    const lifecycle = agentStreams(root, parts.agentId).lifecycle;
    callsOf.set(lifecycle, [...(callsOf.get(lifecycle) ?? []), call]);
  }
  const commands: EpicCommand[] = [];
  let open = 0;
  // Plans first: a plan left open would be sealed working (and would give its agents new tasks);
  // stopped, it interrupts its tasks' turns itself, and no task completion is logged after.
  for (const plan of plans) {
    if (autonomyLoop.terminal.includes(plan.value ?? '')) continue;
    open++;
    if (asked.has(plan.stream)) continue;
    asked.add(plan.stream);
    commands.push({ stream: plan.stream, event: { type: 'user_cancel', reason: CONVERSATION_CLOSING } });
  }
  const stats = { agents: lifecycles.length, turns: 0, toolCalls: calls.length, cancelledToolCalls: 0 };
  // A turn in flight is interrupted whatever its agent's state (one started as its agent was
  // terminated); top-down: a sub-agent's turn is left alone until its parent's turn is over
  // (the parent's delegate call, cancelled as that turn ends, interrupts it), so a delegate call
  // ends cancelled rather than with its sub-agent's interruption.
  for (const turn of turns) {
    if (turn.value === 'idle') continue;
    open++;
    const parts = parseStreamId(turn.stream);
    const parentId = parts?.kind === 'turn' ? (await stateOf(context, agentStreams(root, parts.agentId).lifecycle, agentLifecycle))?.parentId : undefined;
    const parent = parentId === undefined ? undefined : agentStreams(root, parentId);
    if (parent !== undefined && turnOf.has(parent.turn) && !turnOver(parent)) continue;
    if (IN_FLIGHT.has(turn.value ?? '') && !asked.has(turn.stream)) {
      // agentTurns cancels the calls of the round when a turn is interrupted in tool_executing.
      commands.push({ stream: turn.stream, event: { type: 'interrupt', reason: CONVERSATION_CLOSING } });
      asked.add(turn.stream);
    }
  }
  // A ReAct loop not at rest (a model call or a tool call under way, a message left streaming) is
  // ended: its calls in flight fail and its next model call is refused, "conversation closing"
  // (its effects are then no longer due, so the calls under way stop). Asked once per model call
  // answered: if the loop's own observation lands first, the loop it leads to is asked again.
  const working = new Set<string>();
  for (const loop of loops) {
    const state = await stateOf(context, loop.stream, reactAgent);
    if (state === undefined || atRest(reactAgent.id, state) !== undefined) continue;
    open++;
    working.add(loop.stream);
    const key = `${loop.stream}@${state.calledLlmAt}`;
    if (asked.has(key)) continue;
    asked.add(key);
    commands.push(...loopEnded(state, CONVERSATION_CLOSING, context.scheduler.now()).map((event) => ({ stream: loop.stream, event })));
  }
  // An agent whose turn or ReAct stream is there but not yet its lifecycle: the epic that runs it
  // spawns the lifecycle with it (`agentCompanions`), so the close waits to terminate it; sealed
  // first, the lifecycle would be left spawning, its init_complete refused.
  const spawned = new Set(lifecycles.map((head) => head.stream));
  for (const head of [...turns, ...loops]) {
    const parts = parseStreamId(head.stream);
    if ((parts?.kind === 'turn' || parts?.kind === 'react') && !spawned.has(agentStreams(root, parts.agentId).lifecycle)) open++;
  }
  for (const lifecycle of lifecycles) {
    const parts = parseStreamId(lifecycle.stream);
    if (parts?.kind !== 'agent') continue;
    const agent = agentStreams(root, parts.agentId);
    const turn = turnOf.get(agent.turn);
    const agentCalls = callsOf.get(agent.lifecycle) ?? [];
    const turnsRun = turn === undefined ? 0 : ((await stateOf(context, agent.turn, turnEngine))?.turn ?? 0);
    stats.turns += turnsRun;
    stats.cancelledToolCalls += agentCalls.filter((call) => call.value === 'cancelled_result').length;
    // A terminated agent needs no ending, but a call left open under it still blocks the close.
    const ended = agentLifecycle.terminal.includes(lifecycle.value ?? '');
    if (!ended) open++;
    if (turn !== undefined && !turnOver(agent)) continue; // in flight, or ended and its agent not told yet: agentTurns tells it
    // A ReAct agent's loop still working, or its model call's turn not yet ended (reactAgentLifecycle ends it as the loop rests).
    if (working.has(agent.react) || (loopOf.has(agent.react) && lifecycle.value === 'running_turn')) continue;
    for (const call of agentCalls) {
      if (toolCall.terminal.includes(call.value ?? '') || asked.has(call.stream)) continue;
      asked.add(call.stream);
      commands.push({ stream: call.stream, event: { type: 'cancelled', reason: CONVERSATION_CLOSING } });
    }
    if (ended || asked.has(agent.lifecycle)) continue; // asked already: its rune is on its way
    asked.add(agent.lifecycle);
    const agentStats: AgentStats = { turns: turnsRun, toolCalls: agentCalls.length };
    commands.push({ stream: agent.lifecycle, event: { type: 'parent_closed', stats: agentStats } });
  }
  if (open > 0 || calls.some((call) => !toolCall.terminal.includes(call.value ?? ''))) return { commands, done: false };
  // What every turn of the conversation used: its agents' usage, summed.
  const usage = await lastValueFrom(conversationUsage$(root, context));
  return { commands: [{ stream: root, event: { type: 'cleanup_complete', finalStats: { ...stats, usage } } }], done: true };
}

/**
 * The closing of a conversation (seed 003: "All agents terminated. Final runes appended. Runelog
 * sealed."), an effect of its `closing` state, so it resumes after a restart:
 *
 * 0. Every plan of the conversation (`conv/<c>/plan/<p>`) not ended is stopped first:
 *    `user_cancel`, "conversation closing" (the plan then interrupts its running tasks' turns).
 * 1. Every turn in flight is interrupted, "conversation closing" (`agentTurns` then cancels the
 *    open calls of its round, `cancelled_result`, and the agent hears the turn ended); parents
 *    first, as a cancelled delegate call interrupts its sub-agent's turn.
 * 2. Every ReAct loop (`<agent>/react`) not at rest is ended, "conversation closing" (`loopEnded`):
 *    its tool calls in flight fail, a message left streaming is completed, and the loop completes
 *    instead of calling the model again, so the calls under way are stopped; its agent's turn then
 *    ends (`reactAgentLifecycle`).
 * 3. Every agent whose turn is idle (or that has none) and whose loop has ended is terminated with
 *    `parent_closed` (one still `spawning` too; one whose lifecycle is not spawned yet, beside its
 *    turn or ReAct stream, is waited for), its
 *    `agent.terminated` rune carrying its stats (turns run, tool calls made); a call still open
 *    under it is cancelled first.
 * 4. Once every plan and every loop has ended, every agent is terminated (or failed) and every call terminal: `cleanup_complete`, with
 *    the final stats (`agents`, `turns`, `toolCalls`, `cancelledToolCalls`, and `usage`: what all
 *    its turns used). The conversation is
 *    then `closed`, which seals every stream under it (the engine refuses them with `sealed`).
 *
 * Each step looks at the conversation's streams afresh (their heads, under `conv/<c>/agent/`),
 * after each rune under the conversation; steps that pile up behind one another are done once.
 */
export function conversationClose(): Epic {
  return function conversationClose(runes$, context, deps) {
    const closing$ = (root: string): Observable<EpicCommand> => {
      const under = `${root}/`;
      const asked = new Set<string>();
      let queued = 0;
      return runes$.pipe(
        filter((rune: Rune) => rune.stream.startsWith(under)),
        startWith(undefined),
        tap(() => queued++),
        // A look that a later one will repeat is skipped: the conversation is looked at once per burst.
        concatMap(() => (--queued > 0 ? EMPTY : defer(() => closeStep(root, context, asked)))),
        takeWhile((step) => !step.done, true),
        mergeMap((step) => from(step.commands)),
      );
    };
    return stateEffects({
      name: 'conversationClose',
      machine: conversation,
      states: ['closing'],
      effects: (view): EffectsByKey<typeof conversation> => ({ close: closing$(view.stream) }),
    })(runes$, context, deps);
  };
}
