import { EMPTY, Observable, defer, from, lastValueFrom, merge, mergeMap, tap } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import type { AgentLifecycleState } from '../../reducers/agent-lifecycle/schema.js';
import { conversation } from '../../reducers/conversation/machine.js';
import { isRuneOf, type Rune, type RuneOf } from '../../reducers/rune.js';
import { toolCall, toolCallStatus } from '../../reducers/tool-call/machine.js';
import type { ToolCallInput, ToolCallState } from '../../reducers/tool-call/schema.js';
import { STEERED, TURN_PROGRESS, turnEndingOf, turnEngine } from '../../reducers/turn-engine/machine.js';
import type { ToolResultSummary } from '../../reducers/turn-engine/schema.js';
import { NO_USAGE, type Usage } from '../../reducers/budget.js';
import { concatMapByKey } from '../../streams/concat-map-by-key.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand, EpicContext } from '../../streams/epic.js';
import type { EffectsByKey } from '../../streams/state-effects.js';
import { INTERRUPTED_BY_RESTART } from '../tool-call-recovery.js';
import type { AgentStreams } from '../../reducers/stream-ids.js';
import { agentCompanions, type AgentAdmission } from './agent-companions.js';
import { keepNewest } from './keep-newest.js';
import { stateOf } from './state-of.js';
import { agentOfCall, agentOfLifecycle, agentOfTurn } from './streams.js';
import { assignedTurnId } from './turn-assignment.js';
import { turnRunes$ } from './turn-history.js';
import { endedTurnUsage, turnUsageAt } from './turn-usage.js';
import type { BudgetLimits } from './agent-budgets.js';
import { turnStartRefusal$ } from './turn-refusal.js';

type TurnRune = RuneOf<typeof turnEngine>;

const isTerminalCall = (state: ToolCallState | undefined): boolean => state !== undefined && toolCall.terminal.includes(state.value);

/** The calls of a turn's latest tool round (before rune `beforeSeq`, if given), as the model asked for them (from its log). */
async function latestRound(turn: string, context: EpicContext, beforeSeq = Infinity): Promise<readonly ToolCallInput[]> {
  const runes = await lastValueFrom(turnRunes$(turn, context));
  for (let i = runes.length - 1; i >= 0; i--) {
    const { event, seq } = runes[i]!;
    if (seq < beforeSeq && event.type === 'tool_calls_received') return event.calls ?? [];
  }
  return [];
}

/** Options of {@link agentTurns}: the budgets a turn must be within to start, and more. */
export interface AgentTurnsOptions extends BudgetLimits {
  /**
   * Why an agent cannot start (its role has no profile), from its lifecycle (as spawned, or a
   * fresh one's): its lifecycle then gets `init_error` with it instead of `init_complete`.
   * Default: every agent starts.
   */
  readonly initError?: (lifecycle: AgentLifecycleState) => string | undefined;
  /** Why an agent of a role may not start now (the agent registry's say); it then gets `init_error` too. Default: none. */
  readonly admission?: AgentAdmission;
}

/**
 * A turn started: the agent runs it, unless the conversation is not active, the agent is
 * terminated, or either's budget is exhausted.
 */
async function started(agent: AgentStreams, rune: TurnRune, context: EpicContext, limits: AgentTurnsOptions, lastEnded: Usage | undefined): Promise<EpicCommand[]> {
  const interrupt = (reason: string): EpicCommand[] => [{ stream: rune.stream, event: { type: 'interrupt', reason } }];
  // Read at once: the model is already answering, and the agent must be assigned the turn before it ends.
  const [talk, turn, lifecycle] = await Promise.all([
    stateOf(context, agent.root, conversation),
    stateOf(context, rune.stream, turnEngine),
    stateOf(context, agent.lifecycle, agentLifecycle),
  ]);
  // The conversation's usage by now: its turns still running count (their answered calls are theirs
  // until they end), and so does the agent's last turn while the agent's hearing of its end is not durable.
  const refusal = await turnStartRefusal$(agent, talk, lifecycle, context, limits, lifecycle?.value === 'running_turn' ? lastEnded : undefined);
  if (refusal !== undefined) return interrupt(refusal);
  return [{ stream: agent.lifecycle, event: { type: 'turn_assigned', turnId: assignedTurnId(turn, rune.seq) } }];
}

/**
 * What the agent's turn, found ended at `at` in a state an older log left, used: the usage its
 * lifecycle and conversation add up.
 */
async function usageOfTurn(agent: AgentStreams, at: number, context: EpicContext) {
  const turn = await stateOf(context, agent.turn, turnEngine);
  return turn === undefined ? undefined : turnUsageAt(agent.turn, turn, at, context);
}

/** Every call of the round exists (created from the turn's log: again after a crash, harmlessly). */
const callsOf = (agent: AgentStreams, calls: readonly ToolCallInput[]): EpicCommand[] =>
  calls.map((call) => ({ stream: agent.call(call.callId), spawn: toolCall.id, input: call }));

/**
 * The round of the turn, if every one of its calls is done: then the model gets the results
 * (`tools_finished`, with how each call ended). Its key (turn number and call ids) says which round it was.
 */
async function doneRound(agent: AgentStreams, context: EpicContext): Promise<{ key: string; summaries: ToolResultSummary[] } | undefined> {
  const turn = await stateOf(context, agent.turn, turnEngine);
  if (turn?.value !== 'tool_executing') return undefined;
  const summaries: ToolResultSummary[] = [];
  for (const callId of turn.callIds) {
    const call = await stateOf(context, agent.call(callId), toolCall);
    const status = call === undefined ? undefined : toolCallStatus(call);
    if (status === undefined) return undefined; // not created yet, or still running
    summaries.push({ callId, status });
  }
  return { key: `${turn.turn}:${turn.callIds.join(',')}`, summaries };
}

/**
 * A turn ended (completed, error, interrupted; its rune the last of the turn, which is idle again):
 * its calls that are not done are cancelled (so the next model call never sees an orphan call),
 * the agent and the conversation hear of it, and a steer starts the next turn with its input.
 * `startedAt`: the `at` of its `turn.started` if this process assigned the turn (its
 * `turn_assigned` may not be durable yet).
 */
async function ended(agent: AgentStreams, rune: TurnRune, context: EpicContext, startedAt: number | undefined, erred: Map<string, true>): Promise<Ended> {
  const { event } = rune;
  let told: Usage | undefined;
  const ending = turnEndingOf(rune);
  const commands: EpicCommand[] = [];
  if (ending === 'interrupted' && rune.from === 'tool_executing') {
    const reason = event.type === 'interrupt' && event.reason !== undefined ? event.reason : 'turn interrupted';
    for (const call of await latestRound(agent.turn, context, rune.seq)) {
      const stream = agent.call(call.callId);
      const state = await stateOf(context, stream, toolCall);
      if (isTerminalCall(state)) continue;
      if (state === undefined) commands.push({ stream, spawn: toolCall.id, input: call });
      commands.push({ stream, event: { type: 'cancelled', reason } });
    }
  }
  const interruption = event.type === 'interrupt' ? event.reason : event.type === 'steer' ? STEERED : undefined;
  // Assigned by this process (its `turn_assigned` may not be durable yet), or found running.
  if (startedAt !== undefined || (await stateOf(context, agent.lifecycle, agentLifecycle))?.value === 'running_turn') {
    const usage = await endedTurnUsage(rune, context, startedAt);
    told = usage ?? NO_USAGE;
    commands.push({
      stream: agent.lifecycle,
      event:
        ending === 'completed'
          ? { type: 'turn_completed', usage }
          : ending === 'error'
            ? { type: 'turn_error', ...('error' in event ? { error: event.error } : {}), usage }
            : { type: 'turn_interrupted', ...(interruption === undefined ? {} : { reason: interruption }), usage },
    });
    // The conversation hears of it only when it changes its errors in a row (`errorThreshold`):
    // an error counts one more, a completed turn clears them; its usage is its agents' (`conversationUsage$`).
    if (ending === 'error') {
      commands.push({ stream: agent.root, event: { type: 'turn_completed', outcome: 'error' } });
      keepNewest(erred, agent.root, true);
    } else if (ending === 'completed') {
      const unsettled = erred.delete(agent.root); // told of an error that may not be durable yet
      if (unsettled || (await stateOf(context, agent.root, conversation))?.consecutiveErrors !== undefined) {
        commands.push({ stream: agent.root, event: { type: 'turn_completed', outcome: 'completed' } });
      }
    }
  }
  if (event.type === 'steer') commands.push({ stream: agent.turn, event: { type: 'start_turn', input: event.input } });
  return { commands, told };
}

/** What telling of a turn's end takes: its commands, and the usage the agent is told it used (if it is told). */
interface Ended {
  readonly commands: EpicCommand[];
  readonly told: Usage | undefined;
}

/**
 * Runs every agent's turns through its seed-003 machines (a turn stream `<root>/agent/<a>/turn` is
 * an agent; see `agentStreams`):
 *
 * 1. Its turn stream spawned: its `agentLifecycle` stream is created unless it exists (spawned
 *    first with a role), ready (or `init_error` if `options.initError` says why not), and its conversation
 *    (`<root>`) if none is there yet, with it as the root agent.
 * 2. A turn started: the agent runs it (`turn_assigned`; the conversation is sent no `new_turn`:
 *    its turns are its agents', a rune fewer a turn); if the conversation is suspended or closed
 *    (or paused: the engine refuses such a start, `held`, unless it was applied first), the agent
 *    terminated, or the agent's or conversation's budget (`options`) exhausted, the
 *    conversation's turns still running counted, the turn is interrupted with why.
 * 3. The model asked for tools (`tool_calls_received`): a `toolCall` stream per call.
 * 4. The last call of a round is done: `tools_finished`, and the model gets the results.
 * 5. A turn ended: calls not done are cancelled (`cancelled_result`), the agent and conversation
 *    hear of it with the turn's usage (the conversation with its `outcome` too, for its
 *    `errorThreshold`), the turn is finalized; a steer starts the next turn.
 *
 * After a restart the engine resumes, from the stored turns, what is left to do (its effects of
 * state, see `stateEffects`): a tool round's missing calls are created and a finished round goes
 * on; an ended turn is finalized. (A turn that was streaming is `agentModel`'s: it is interrupted.)
 */
export function agentTurns(options: AgentTurnsOptions = {}): Epic {
  return function agentTurns(runes$, context) {
    // The rounds this epic has finished: a resumed round and a live result may both find a round
    // done, and the model must get its results once.
    const finished = new Set<string>();
    // The turns this epic assigned to their agents and that have not ended yet, with when each
    // started: the end of one tells its agent, whose durable state may not show the assignment yet
    // (a batch not committed), and its wall clock needs no read of its log.
    const assignedTurns = new Map<string, number>();
    // Per turn stream, what the agent was told its last turn used, until its next turn starts.
    const lastEnded = new Map<string, Usage>();
    // The conversations this epic told of a turn ending in error, until a completed turn clears them.
    const erred = new Map<string, true>();
    /** Keeps what `ended` told, and gives its commands. */
    const remember = (turn: string, { commands, told }: Ended): EpicCommand[] => {
      if (told !== undefined) keepNewest(lastEnded, turn, told);
      return commands;
    };
    // Per turn stream whose agent is being resumed (`unfinished` below), the seq of the ending
    // told for it since: the resume and a live ending may find the same one, and it is told once.
    // Only agents found running a turn at start are in it, and only while their resume runs.
    const resuming = new Map<string, number | undefined>();
    /** Whether the ending `rune` is still to be told (and now is), for a turn whose agent is being resumed. */
    const firstTold = (rune: TurnRune): boolean => {
      if (!resuming.has(rune.stream)) return true;
      if (resuming.get(rune.stream) === rune.seq) return false;
      resuming.set(rune.stream, rune.seq);
      return true;
    };
    const finishRound = async (agent: AgentStreams): Promise<EpicCommand[]> => {
      const round = await doneRound(agent, context);
      if (round === undefined || finished.has(`${agent.turn}#${round.key}`)) return [];
      finished.add(`${agent.turn}#${round.key}`);
      return [{ stream: agent.turn, event: { type: 'tools_finished', more: true, resultSummaries: round.summaries } }];
    };

    const onRune = (rune: Rune): Observable<EpicCommand> => {
      if (isRuneOf(toolCall, rune)) {
        const agent = agentOfCall(rune.stream);
        if (agent === undefined || rune.to === undefined || !toolCall.terminal.includes(rune.to)) return EMPTY;
        return defer(() => finishRound(agent)).pipe(mergeMap((commands) => commands));
      }
      if (!isRuneOf(turnEngine, rune)) return EMPTY;
      const agent = agentOfTurn(rune.stream);
      if (agent === undefined) return EMPTY;
      const { event } = rune;
      if (event.type === 'spawn') return defer(() => agentCompanions(agent, context, options.initError, options.admission)).pipe(mergeMap((commands) => commands));
      if (event.type === 'start_turn') {
        return defer(() => {
          const ended = lastEnded.get(agent.turn);
          lastEnded.delete(agent.turn);
          return started(agent, rune, context, options, ended);
        }).pipe(
          tap((commands) => {
            if (commands.some((command) => 'event' in command && command.event.type === 'turn_assigned')) assignedTurns.set(agent.turn, rune.at);
          }),
          mergeMap((commands) => commands),
        );
      }
      if (event.type === 'tool_calls_received') return from(callsOf(agent, event.calls ?? []));
      if (rune.from === 'tool_executing') {
        // The round is over (its results went to the model, or the turn ended): forget it.
        for (const key of finished) if (key.startsWith(`${agent.turn}#`)) finished.delete(key);
      }
      if (turnEndingOf(rune) !== undefined && firstTold(rune)) {
        return defer(() => {
          const startedAt = assignedTurns.get(agent.turn);
          assignedTurns.delete(agent.turn);
          return ended(agent, rune, context, startedAt, erred).then((told) => remember(agent.turn, told));
        }).pipe(mergeMap((commands) => commands));
      }
      return EMPTY;
    };

    /**
     * What a turn found in one of these states when this process took it over still needs (a
     * turn found `streaming` is `agentModel`'s): a tool round's missing calls are created and a
     * finished round goes on; an ended turn is finalized, and an agent left running it is told.
     */
    const resumed = stateEffects({
      name: 'agentTurns',
      machine: turnEngine,
      states: ['tool_executing', 'completed', 'interrupted', 'error'],
      effects: (view): EffectsByKey<typeof turnEngine> => {
        const agent = agentOfTurn(view.stream);
        if (view.origin !== 'resumed' || agent === undefined) return {};
        const resume = async (): Promise<EpicCommand[]> => {
          if (view.value === 'tool_executing') return [...callsOf(agent, await latestRound(view.stream, context)), ...(await finishRound(agent))];
          const lifecycle = await stateOf(context, agent.lifecycle, agentLifecycle);
          const commands: EpicCommand[] = [];
          if (lifecycle?.value === 'running_turn') {
            const usage = await usageOfTurn(agent, view.at, context);
            commands.push({ stream: agent.lifecycle, event: { type: 'turn_interrupted', reason: INTERRUPTED_BY_RESTART, usage } });
          }
          commands.push({ stream: view.stream, event: { type: 'turn_finalized' } });
          return commands;
        };
        return { resume: defer(resume).pipe(mergeMap((commands) => commands)) };
      },
    });

    /**
     * An agent found running a turn when this process took it over, whose turn has ended (it is
     * idle again, its ending rune its last): the process that appended the ending died before the
     * agent and the conversation heard of it, so they hear of it now, as they would have.
     */
    const unfinished = stateEffects({
      name: 'agentTurns.unfinished',
      machine: agentLifecycle,
      states: ['running_turn'],
      effects: (view): EffectsByKey<typeof agentLifecycle> => {
        const agent = agentOfLifecycle(view.stream);
        if (view.origin !== 'resumed' || agent === undefined) return {};
        const resume = async (): Promise<EpicCommand[]> => {
          resuming.set(agent.turn, undefined);
          try {
            const turn = await stateOf(context, agent.turn, turnEngine);
            if (turn?.value !== 'idle') return []; // running: its end is heard live; none: a ReAct agent's
            const runes = await lastValueFrom(turnRunes$(agent.turn, context));
            let ending: TurnRune | undefined;
            for (let i = runes.length - 1; ending === undefined && i >= 0; i--) if (turnEndingOf(runes[i]!) !== undefined) ending = runes[i];
            if (ending === undefined || !firstTold(ending)) return [];
            // The agent's last: its rune ends this effect (the agent is no longer running_turn), and what follows it would not be sent.
            const commands = remember(agent.turn, await ended(agent, ending, context, undefined, erred));
            return [...commands.filter((command) => command.stream !== agent.lifecycle), ...commands.filter((command) => command.stream === agent.lifecycle)];
          } finally {
            resuming.delete(agent.turn);
          }
        };
        return { resume: defer(resume).pipe(mergeMap((commands) => commands)) };
      },
    });

    // Per agent, one rune at a time: its commands keep the order of its runes. Agents run side by
    // side, and an agent with nothing to do holds nothing. A turn's progress asks nothing of them.
    const progress: ReadonlySet<string> = new Set(TURN_PROGRESS);
    const agentKey = (rune: Rune): string | undefined =>
      (isRuneOf(turnEngine, rune) ? (progress.has(rune.event.type) ? undefined : agentOfTurn(rune.stream)) : isRuneOf(toolCall, rune) ? agentOfCall(rune.stream) : undefined)
        ?.turn;
    return merge(runes$.pipe(concatMapByKey(agentKey, onRune)), resumed(runes$, context, undefined), unfinished(runes$, context, undefined));
  };
}
