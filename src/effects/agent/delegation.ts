import { createHash } from 'node:crypto';
import { EMPTY, Observable, catchError, concat, concatMap, defer, filter, first, from, lastValueFrom, map, merge, mergeMap, of, toArray } from 'rxjs';
import { z } from 'zod';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import { conversation } from '../../reducers/conversation/machine.js';
import type { AgentLifecycleState } from '../../reducers/agent-lifecycle/schema.js';
import { isRuneOf, type Rune } from '../../reducers/rune.js';
import { MAX_SEGMENT, agentStreams, type AgentStreams } from '../../reducers/stream-ids.js';
import { toolCall } from '../../reducers/tool-call/machine.js';
import type { ToolCallEvent, ToolCallState } from '../../reducers/tool-call/schema.js';
import { turnEndingOf, turnEngine } from '../../reducers/turn-engine/machine.js';
import type { TurnEngineState } from '../../reducers/turn-engine/schema.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand, EpicContext } from '../../streams/epic.js';
import type { EffectsByKey, StreamView } from '../../streams/state-effects.js';
import { errorText } from '../../reducers/error-text.js';
import { checkedClaim, claimCallThenRun, randomClaimId } from '../tools/claim-execution.js';
import { defineTool, type AnyTool } from '../tools/tool.js';
import { INTERRUPTED_BY_RESTART, executionStart } from '../tool-call-recovery.js';
import { agentOfCall } from './streams.js';
import { stateOf } from './state-of.js';
import { turnRunes$ } from './turn-history.js';
import { turnRefusal$ } from './turn-refusal.js';

/** The name of the built-in tool through which an agent hands a task to a sub-agent. */
export const DELEGATE_TOOL = 'delegate';

/** Limits on delegation, per conversation. */
export interface DelegationLimits {
  /** How deep sub-agents may nest: a root agent is depth 0, its sub-agents 1. Default 2. */
  readonly maxDepth?: number;
  /** How many agents a conversation may have, its root included. Default 16. */
  readonly maxAgents?: number;
}

/** The input of the `delegate` tool. */
export const DelegateInput = z.strictObject({
  /** The sub-agent's role: one of the configured profiles. */
  role: z.string().min(1),
  /** What the sub-agent is to do: the input of its turn. */
  task: z.string().min(1),
});
export type DelegateInput = z.infer<typeof DelegateInput>;

/**
 * The `delegate` tool as the model sees it: one of `roles` and a task. Its calls are run by
 * {@link delegation}, never by this tool's `execute` (the tool-call effects leave them alone).
 */
export function delegateTool(roles: Readonly<Record<string, { readonly description?: string }>>): AnyTool {
  const names = Object.keys(roles);
  const described = names.map((role) => (roles[role]!.description === undefined ? role : `${role} (${roles[role]!.description})`)).join('; ');
  return defineTool({
    name: DELEGATE_TOOL,
    description: `Hands a task to a new sub-agent of a role and returns its final answer. Roles: ${described}.`,
    inputSchema: z.strictObject({ role: z.enum(names as [string, ...string[]]), task: DelegateInput.shape.task }),
    timeoutMs: Infinity,
    rerunSafe: true,
    parallelSafe: true,
    execute: () => {
      throw new Error('the delegate tool runs as the delegation effect; add agentEpics({ agents }) to the engine');
    },
  });
}

/**
 * The sub-agent a delegate call spawns: its id follows from the call alone, so after a restart the
 * same call finds its sub-agent instead of spawning another. `<parent>.<call>` when that fits a
 * segment, else a digest of it.
 */
export function subAgentId(parentId: string, callId: string): string {
  const id = `${parentId}.${callId}`;
  return id.length <= MAX_SEGMENT ? id : `sub-${createHash('sha256').update(id).digest('hex').slice(0, 32)}`;
}

/** How the sub-agent's turn ended: the rune that ended it, and its state then. */
interface TurnEnd {
  readonly rune: Rune;
  readonly turn: TurnEngineState | undefined;
}

/**
 * Whether a restart cut the sub-agent's first turn (its model call died with the process, and
 * `agentModel` interrupted it): its task is then started once more, as its second turn. A second
 * turn cut the same way is the call's error result: a task is retried once, never in a loop.
 */
const cutByRestart = ({ rune, turn }: TurnEnd): boolean =>
  turnEndingOf(rune) === 'interrupted' && rune.event.type === 'interrupt' && rune.event.reason === INTERRUPTED_BY_RESTART && turn?.turn === 1;

/** The result of the sub-agent's turn, once it ended: from the rune that ended it and its state then. */
function outcome({ rune: ended, turn }: TurnEnd): ToolCallEvent {
  const ending = turnEndingOf(ended);
  if (ending === 'completed') return { type: 'success', output: turn?.output ?? '' };
  const { event } = ended;
  if (ending === 'error') return { type: 'execution_error', error: `the sub-agent's turn failed: ${'error' in event ? String(event.error) : 'error'}` };
  const reason = event.type === 'interrupt' && typeof event.reason === 'string' ? `: ${event.reason}` : '';
  return { type: 'execution_error', error: `the sub-agent's turn was interrupted${reason}` };
}

/** A stream's durable state now. */

/** How deep `agent` is: how many parents it has, following `parentId`. */
async function depthOf(root: string, agentId: string, context: EpicContext): Promise<number> {
  let depth = 0;
  for (let id: string | undefined = agentId; depth <= 64; depth++) {
    const lifecycle: AgentLifecycleState | undefined = await stateOf(context, agentStreams(root, id).lifecycle, agentLifecycle);
    id = lifecycle?.parentId;
    if (id === undefined) return depth;
  }
  return depth;
}

/** Options of {@link delegation}. */
export interface DelegationOptions extends DelegationLimits {
  /** The roles a sub-agent may have, with the name of each one's model (for its `agent.spawning` rune). */
  readonly roles: Readonly<Record<string, { readonly model?: string }>>;
  /**
   * A new claim id for each run of a delegate call, recorded by its `execution_claimed` before
   * anything is spawned: unique across every process sharing the log. Default: a random UUID.
   */
  readonly claimId?: () => string;
}

/**
 * Runs every `delegate` call (seed 003: a conversation hosts a root agent and the agents it
 * spawns), an effect of the call's `executing` state, so it resumes after a restart:
 *
 * 1. The input is checked (a configured role, a task): a call that fails ends with an
 *    `execution_error` naming what is wrong, unclaimed. Then the call is claimed, as every tool
 *    run is (`execution_claimed`, a `tool.claimed` rune; see `claimThenRun`), and the rest runs
 *    only once the claim recorded is this run's: of two runners (a failover), one goes on. Then
 *    the limits: the sub-agent's depth (`maxDepth`) and the conversation's agent count
 *    (`maxAgents`). A call over one ends with an `execution_error` naming the limit, and the
 *    parent's turn goes on.
 * 2. The sub-agent is spawned in the same conversation (`agent.spawning` with its role, model and
 *    `parentId`), its id {@link subAgentId} of the call; its turn starts with the task.
 * 3. The call's result is the sub-agent's turn's: its final output (`success`), or an
 *    `execution_error` if the turn failed or was interrupted.
 * 4. After a restart the call, still `executing`, is claimed again, superseding its dead run's
 *    claim (`executionStart`, a delegate call being safe to run again: the sub-agent's id follows
 *    from the call), never interrupted; it finds its sub-agent and waits again (or takes the
 *    result of a turn that ended meanwhile). The spawn alone (a second one is refused,
 *    `stream_exists`) would not make it exactly once: a second runner could find the turn idle
 *    again and start the task a second time; the claim does. A sub-agent's first turn that was
 *    streaming when the process died (`agentModel` interrupts it, "interrupted by restart") is started again once
 *    with the task, and the call's result is that second turn's; a second turn cut the same way
 *    ends the call with an `execution_error`. A cancelled delegate call interrupts the sub-agent's turn.
 * 5. A task that may not start (`turnRefusal`: the conversation paused, suspended or closing, the
 *    sub-agent ended) ends the call with an `execution_error` saying why ("the sub-agent's turn
 *    could not start: the conversation is paused"), first run or resumed, nothing spawned if not
 *    yet: the engine holds back a paused conversation's `start_turn` (`held`) and tells no epic,
 *    so a call waiting for that turn's end would wait for ever. A pause that lands after the
 *    check, before the start, ends it the same way. The parent's turn then goes on as after any
 *    tool round (in a paused conversation, `agentModel` interrupts it).
 */
export function delegation(options: DelegationOptions): Epic {
  const { roles, maxDepth = 2, maxAgents = 16, claimId = randomClaimId } = options;
  for (const [name, value] of Object.entries({ maxDepth, maxAgents })) {
    if (!Number.isInteger(value) || value < 1) throw new TypeError(`agentEpics: "delegation.${name}" must be a positive integer, got ${String(value)}`);
  }
  if (typeof claimId !== 'function') throw new TypeError(`delegation: "claimId" must be a function giving a new claim id, got ${typeof claimId}`);
  return function delegation(runes$, context, deps) {
    /** The live end of the sub-agent's turn: the rune that ended it, and its state then. */
    const liveEnd$ = (sub: AgentStreams): Observable<TurnEnd> =>
      runes$.pipe(
        filter((rune) => rune.stream === sub.turn && turnEndingOf(rune) !== undefined),
        first(),
        mergeMap(async (rune) => ({ rune, turn: await stateOf(context, sub.turn, turnEngine) })),
      );
    const liveResult$ = (sub: AgentStreams): Observable<ToolCallEvent> => liveEnd$(sub).pipe(map(outcome));

    /** After a restart: the end of its current turn if it ended meanwhile (in the log after its last start), else its live end. */
    const resumedEnd$ = (sub: AgentStreams): Observable<TurnEnd> =>
      merge(
        liveEnd$(sub),
        defer(async () => {
          const runes = await lastValueFrom(turnRunes$(sub.turn, context));
          for (const rune of [...runes].reverse()) {
            if (rune.event.type === 'start_turn') return [];
            if (turnEndingOf(rune) !== undefined) return [{ rune, turn: await stateOf(context, sub.turn, turnEngine) }];
          }
          return [];
        }).pipe(mergeMap((ended) => ended)),
      ).pipe(first());

    /** The sub-agent's turn idle again (ended): live, or as it is now. */
    const idle$ = (sub: AgentStreams): Observable<unknown> =>
      merge(
        runes$.pipe(filter((rune) => rune.stream === sub.turn && rune.to === 'idle')),
        defer(() => stateOf(context, sub.turn, turnEngine)).pipe(filter((turn) => turn?.value === 'idle')),
      ).pipe(first());

    /**
     * The task as a new turn of the sub-agent, after `before` (its spawn), listening (subscribed
     * first) for its end before it starts. Unless no turn of it may start (`turnRefusal`: its
     * conversation paused, suspended or closing; it ended): the call's result is then an error
     * saying why, and nothing is spawned or started. A start refused all the same (`held`: the
     * conversation paused after the check) is told to no epic: once its conversation refuses
     * turns while the sub-agent's turn has not started, the call ends with that error too.
     */
    const start$ = (sub: AgentStreams, task: string, before: readonly EpicCommand[] = []): Observable<EpicCommand | ToolCallEvent> => {
      const refused = (reason: string): ToolCallEvent => ({ type: 'execution_error', error: `the sub-agent's turn could not start: ${reason}` });
      /** Why no turn of the sub-agent may start, if none may and it has not started one past its `turns`. */
      const unstarted = async (turns: number): Promise<string | undefined> => {
        const reason = await lastValueFrom(turnRefusal$(sub, context));
        return reason !== undefined && ((await stateOf(context, sub.turn, turnEngine))?.turn ?? 0) === turns ? reason : undefined;
      };
      return defer(async (): Promise<Observable<EpicCommand | ToolCallEvent>> => {
        const turns = (await stateOf(context, sub.turn, turnEngine))?.turn ?? 0;
        const reason = await unstarted(turns);
        if (reason !== undefined) return of(refused(reason));
        const held$ = runes$.pipe(
          filter((rune) => rune.stream === sub.root && isRuneOf(conversation, rune)),
          concatMap(() => unstarted(turns)),
          filter((why): why is string => why !== undefined),
          map(refused),
        );
        const start: EpicCommand = { stream: sub.turn, event: { type: 'start_turn', input: task } };
        return concat(from(before), merge(merge(liveResult$(sub), held$).pipe(first()), of(start)));
      }).pipe(mergeMap((effect) => effect));
    };

    /** A sub-agent found after a restart: its turn's result, or its task started once more if the restart cut its first turn. */
    const resumed$ = (sub: AgentStreams, task: string): Observable<EpicCommand | ToolCallEvent> =>
      resumedEnd$(sub).pipe(mergeMap((end) => (cutByRestart(end) ? idle$(sub).pipe(mergeMap(() => start$(sub, task))) : of(outcome(end)))));

    /** What a delegate call asks for, or why it cannot run (a role that is not configured, no task). */
    const delegated = (stream: string, call: ToolCallState): { error: string } | { parent: AgentStreams; sub: AgentStreams; role: string; task: string } => {
      const parent = agentOfCall(stream)!;
      const input = DelegateInput.safeParse(call.arguments);
      if (!input.success) return { error: `delegate: ${input.error.issues.map((issue) => `${issue.path.join('.') || 'input'}: ${issue.message}`).join('; ')}` };
      const { role, task } = input.data;
      if (!Object.hasOwn(roles, role)) return { error: `delegate: no role "${role}"; the roles are ${Object.keys(roles).join(', ')}` };
      return { parent, sub: agentStreams(parent.root, subAgentId(parent.agentId, call.callId)), role, task };
    };

    /** The run of a claimed delegate call: its sub-agent spawned and its task started, or found after a restart. */
    const delegate$ = (parent: AgentStreams, sub: AgentStreams, role: string, task: string): Observable<EpicCommand | ToolCallEvent> => {
      const refuse = (error: string): Observable<ToolCallEvent> => of({ type: 'execution_error', error });
      return defer(async (): Promise<Observable<EpicCommand | ToolCallEvent>> => {
        const turn = await stateOf(context, sub.turn, turnEngine);
        if (turn !== undefined && turn.turn > 0) return resumed$(sub, task); // found after a restart: wait again
        if (turn === undefined) {
          const depth = (await depthOf(parent.root, parent.agentId, context)) + 1;
          if (depth > maxDepth) return refuse(`delegate: a sub-agent of "${parent.agentId}" would be at depth ${depth}, over delegation.maxDepth (${maxDepth})`);
          const agents = await lastValueFrom(context.streams({ prefix: `${parent.root}/agent/`, machine: agentLifecycle.id }).pipe(toArray()));
          if (agents.length >= maxAgents) return refuse(`delegate: the conversation has ${agents.length} agents, delegation.maxAgents (${maxAgents})`);
        }
        const { model } = roles[role]!;
        const spawn: EpicCommand[] = [
          { stream: sub.lifecycle, spawn: agentLifecycle.id, input: { agentId: sub.agentId, role, parentId: parent.agentId, ...(model === undefined ? {} : { model }) } },
          { stream: sub.turn, spawn: turnEngine.id, input: { agentId: sub.agentId } },
        ];
        return start$(sub, task, spawn);
      }).pipe(mergeMap((effect) => effect));
    };

    /**
     * A delegate call in `executing`, by `executionStart`'s rule: claimed, then run. A re-run is
     * safe (it finds its sub-agent), so a call taken over claimed is claimed again, never
     * interrupted; one another runner claimed first is left to it.
     */
    const claimed$ = (view: StreamView<typeof toolCall>, call: ToolCallState): Observable<EpicCommand | ToolCallEvent> => {
      const start = executionStart(call, view.origin, true);
      if (start.action !== 'claim') return EMPTY;
      const asked = delegated(view.stream, call);
      if ('error' in asked) return of<ToolCallEvent>({ type: 'execution_error', error: asked.error });
      let claim: string;
      try {
        claim = checkedClaim(claimId);
      } catch (error) {
        return of<ToolCallEvent>({ type: 'execution_error', error: `the delegation failed: ${errorText(error)}` });
      }
      return claimCallThenRun(view, claim, start.supersedes, delegate$(asked.parent, asked.sub, asked.role, asked.task));
    };

    const calls = stateEffects({
      name: 'delegation',
      machine: toolCall,
      states: ['executing'],
      effects: (view): EffectsByKey<typeof toolCall> =>
        agentOfCall(view.stream) === undefined
          ? {}
          : {
              delegate: view.state$.pipe(mergeMap((call) => (call?.value === 'executing' && call.toolName === DELEGATE_TOOL ? claimed$(view, call) : EMPTY))),
            },
    });

    // A cancelled delegate call (its turn interrupted, its conversation closing) interrupts its sub-agent's turn.
    const cancelled$ = runes$.pipe(
      filter((rune) => isRuneOf(toolCall, rune) && rune.to === 'cancelled_result'),
      mergeMap(async (rune): Promise<EpicCommand[]> => {
        const parent = agentOfCall(rune.stream);
        const call = parent === undefined ? undefined : await stateOf(context, rune.stream, toolCall);
        if (parent === undefined || call?.toolName !== DELEGATE_TOOL) return [];
        const sub = agentStreams(parent.root, subAgentId(parent.agentId, call.callId));
        const turn = await stateOf(context, sub.turn, turnEngine);
        if (turn?.value !== 'streaming' && turn?.value !== 'tool_executing') return [];
        const reason = rune.event.type === 'cancelled' && rune.event.reason !== undefined ? rune.event.reason : 'delegate call cancelled';
        return [{ stream: sub.turn, event: { type: 'interrupt', reason } }];
      }),
      mergeMap((commands) => commands),
      catchError(() => EMPTY), // a state that cannot be read: the conversation's closing interrupts it in any case
    );
    return merge(calls(runes$, context, deps), cancelled$);
  };
}
