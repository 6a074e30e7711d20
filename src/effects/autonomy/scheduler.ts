import { NEVER, Observable, concat, concatMap, defer, filter, finalize, from, lastValueFrom, map, merge, mergeMap, of, take, toArray } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import { autonomyLoop } from '../../reducers/autonomy-loop/machine.js';
import type { AutonomyLoopEvent, AutonomyLoopState, TaskState } from '../../reducers/autonomy-loop/schema.js';
import { allRunnableBlocked, allTasksTerminal, isTaskActive, runnableTasks } from '../../reducers/autonomy-loop/tasks.js';
import type { Rune } from '../../reducers/rune.js';
import { agentStreams, parseStreamId, type AgentStreams } from '../../reducers/stream-ids.js';
import { turnEndingOf, turnEngine } from '../../reducers/turn-engine/machine.js';
import { durableDeadline } from '../../streams/durable-deadline.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand } from '../../streams/epic.js';
import type { EffectsByKey } from '../../streams/state-effects.js';
import { stateOf } from '../agent/state-of.js';
import { INTERRUPTED_BY_RESTART } from '../tool-call-recovery.js';
import { resolveAutonomyOptions, type AutonomyOptions } from './autonomy-options.js';
import { taskPrompt } from './prompts.js';
import { evidenceOf, findTurn, outcomeOf, turnEnded$, turnIdle$ } from './task-turn.js';

type Out = AutonomyLoopEvent | EpicCommand;

/**
 * One assign effect's hold on an agent for its task: made by its pick (in the same synchronous
 * step as the choice), released when the effect ends; a pick that settles after the end holds nothing.
 */
interface Claim {
  /** The agent (its lifecycle stream) it holds, once picked. */
  agent?: string;
  ended: boolean;
}

/** The conversation a plan stream (`conv/<c>/plan/<p>`) belongs to. */
const rootOfPlan = (stream: string): string | undefined => {
  const parts = parseStreamId(stream);
  return parts?.kind === 'plan' ? parts.root : undefined;
};

/**
 * The scheduler of the autonomy loop (seed 003), an effect of a plan in `executing`, decided
 * from its state alone:
 *
 * 1. Runnable tasks (pending, every dependency done), highest priority first, up to `parallelism`
 *    tasks with an agent at once, are each given an agent of the conversation with the task's
 *    `ownerRole` that is idle and not busy with another task; with none, one is spawned
 *    (`<role>-<n>`, role in its `agent.spawning`), at most `parallelism` agents of a role; else
 *    the task looks again whenever an agent is idle or ended or the plan changes -> `task_assigned`.
 *    An agent is held for a task only until the plan shows it assigned, so a task run again (a
 *    critic's retry, `retry_task`, a replan) finds the agents of its earlier runs free.
 * 2. An assigned task's agent, once its turn is idle: its turn starts with the task, the goal and
 *    its dependencies' results, and `task_started {turnNumber}`.
 * 3. The turn's end -> `task_completed`: `success` with its final output, or `failure` with why;
 *    evidence is the turn stream, its seq range and its tool results. A turn cut by a restart is
 *    started again (a new `task_started`): a task whose completion was logged never runs again.
 * 4. Every task ended -> `all_tasks_terminal`; nothing runnable and nothing running, some not
 *    ended (a failed dependency) -> `all_runnable_blocked`.
 * 5. In `blocked`, a task runnable again (an operator's `retry_task` of a failed one) ->
 *    `dependency_resolved`; none within `blockedTimeoutMs` of the plan's last rune -> `unresolvable`.
 */
export function autonomyScheduler(autonomyOptions: AutonomyOptions): Epic {
  const options = resolveAutonomyOptions(autonomyOptions);
  const { parallelism, blockedTimeoutMs } = options;
  return function autonomyScheduler(runes$, context, deps) {
    /**
     * Agents picked and not yet shown busy by their plan's state, by agent stream. A reservation
     * lives exactly as long as the assign effect that made it: that effect's key goes once the
     * task is assigned (its agent busy in the plan's state from then on) or the plan leaves
     * `executing`, so no attempt's reservation outlives it, and a restart starts with none.
     */
    const reserved = new Map<string, Claim>();
    /** Task turns this process started (`<plan>#<task>@<turn>`): their run only waits for the end. */
    const startedHere = new Set<string>();
    /** Each agent's role, by lifecycle stream: it never changes. */
    const roles = new Map<string, string | undefined>();

    const roleOf = async (lifecycle: string): Promise<string | undefined> => {
      if (!roles.has(lifecycle)) roles.set(lifecycle, (await stateOf(context, lifecycle, agentLifecycle))?.role);
      return roles.get(lifecycle);
    };

    /** An agent for `task`, held by `claim`: an idle one of its role, or a new one; `undefined` while every one it may have is busy. */
    const pick = async (stream: string, root: string, task: TaskState, claim: Claim): Promise<{ agent: AgentStreams; spawn: boolean } | undefined> => {
      const heads = await lastValueFrom(context.streams({ prefix: `${root}/agent/`, machine: agentLifecycle.id }).pipe(toArray()));
      const live = heads.filter((head) => head.value === undefined || !agentLifecycle.terminal.includes(head.value));
      const ofRole: { head: (typeof heads)[number]; agent: AgentStreams }[] = [];
      for (const head of live) {
        const parts = parseStreamId(head.stream);
        if (parts?.kind !== 'agent') continue;
        if ((await roleOf(head.stream)) === task.ownerRole) ofRole.push({ head, agent: agentStreams(root, parts.agentId) });
      }
      // From here on synchronous: the reservations read are the ones this choice competes with.
      if (claim.ended) return undefined;
      const plan = context.state(stream, autonomyLoop);
      const busy = new Set((plan?.tasks ?? []).filter(isTaskActive).map((each) => each.agentId));
      const taken = (agent: AgentStreams): boolean => busy.has(agent.agentId) || reserved.has(agent.lifecycle);
      const idle = ofRole.find(({ head, agent }) => head.value === 'idle' && !taken(agent));
      let agent = idle?.agent;
      if (agent === undefined && ofRole.length < parallelism) {
        const ids = new Set(heads.map((head) => head.stream));
        let n = 1;
        while (ids.has(agentStreams(root, `${task.ownerRole}-${n}`).lifecycle) || reserved.has(agentStreams(root, `${task.ownerRole}-${n}`).lifecycle)) n++;
        agent = agentStreams(root, `${task.ownerRole}-${n}`);
      }
      if (agent === undefined) return undefined;
      claim.agent = agent.lifecycle;
      reserved.set(agent.lifecycle, claim);
      return { agent, spawn: idle === undefined };
    };

    /**
     * What may free an agent for a waiting task: an agent of the conversation idle again or ended,
     * or a rune of the plan (a task of it ended, its agent no longer busy).
     */
    const mayFree$ = (stream: string, root: string): Observable<Rune> =>
      runes$.pipe(
        filter(
          (rune) =>
            rune.stream === stream ||
            (rune.stream.startsWith(`${root}/agent/`) && rune.machine === agentLifecycle.id && (rune.to === 'idle' || agentLifecycle.terminal.includes(rune.to ?? ''))),
        ),
      );

    /**
     * The task given an agent: picked now, else again on whatever may free one (heard from before
     * the first pick, so nothing is missed in between). It never completes: its reservation is
     * released when the effect's key goes (see `reserved`).
     */
    const assign$ = (stream: string, root: string, task: TaskState): Observable<Out> =>
      defer(() => {
        const claim: Claim = { ended: false };
        return merge(of(undefined), mayFree$(stream, root)).pipe(
          concatMap(() => pick(stream, root, task, claim)),
          filter((chosen) => chosen !== undefined),
          take(1),
          mergeMap(({ agent, spawn }): Observable<Out> => {
            const spawns: EpicCommand[] = spawn
              ? [
                  { stream: agent.lifecycle, spawn: agentLifecycle.id, input: { agentId: agent.agentId, role: task.ownerRole } },
                  { stream: agent.turn, spawn: turnEngine.id, input: { agentId: agent.agentId } },
                ]
              : [];
            return concat(from<Out[]>([...spawns, { type: 'task_assigned', taskId: task.id, agentId: agent.agentId }]), NEVER);
          }),
          finalize(() => {
            claim.ended = true;
            if (claim.agent !== undefined && reserved.get(claim.agent) === claim) reserved.delete(claim.agent);
          }),
        );
      });

    /** The task's turn started on its agent, once the agent's turn is idle: `start_turn`, then `task_started`. */
    const start$ = (plan: AutonomyLoopState, agent: AgentStreams, task: TaskState): Observable<Out> =>
      turnIdle$(runes$, context, agent).pipe(
        mergeMap((turns) => {
          startedHere.add(`${plan.planId}#${task.id}@${turns + 1}`);
          // The turn first: `task_started` moves the plan on, which ends this effect.
          return from<Out[]>([
            { stream: agent.turn, event: { type: 'start_turn', input: taskPrompt(plan, task) } },
            { type: 'task_started', taskId: task.id, turnNumber: turns + 1 },
          ]);
        }),
      );

    /** A running task: its turn started if it is not yet (a crash in between), then its end as `task_completed`. */
    const run$ = (plan: AutonomyLoopState, agent: AgentStreams, task: TaskState): Observable<Out> => {
      const n = task.turnNumber!;
      const prompt = taskPrompt(plan, task);
      const ended$ = turnEnded$(runes$, context, agent, n).pipe(mergeMap((ended) => completed$(plan, agent, task, ended)));
      if (startedHere.delete(`${plan.planId}#${task.id}@${n}`)) return ended$;
      return defer(async () => ({ turn: await stateOf(context, agent.turn, turnEngine), found: await findTurn(context, agent, n) })).pipe(
        mergeMap(({ turn, found }): Observable<Out> => {
          // Not started: its start_turn died with a process, or waits for the agent to be idle.
          if (found.start === undefined && (turn?.turn ?? 0) < n) {
            return merge(
              ended$,
              turnIdle$(runes$, context, agent).pipe(mergeMap((turns): Out[] => (turns < n ? [{ stream: agent.turn, event: { type: 'start_turn', input: prompt } }] : []))),
            );
          }
          // Turn n is not this task's (another turn took the agent first): start it anew.
          if (found.start === undefined || found.start.event.type !== 'start_turn' || found.start.event.input !== prompt) return start$(plan, agent, task);
          return ended$;
        }),
      );
    };

    const completed$ = (plan: AutonomyLoopState, agent: AgentStreams, task: TaskState, ended: { start: Rune; end: Rune }): Observable<Out> => {
      const { event } = ended.end;
      // Cut by a restart: the task has no result yet; it runs again in the agent's next turn.
      if (turnEndingOf(ended.end) === 'interrupted' && event.type === 'interrupt' && event.reason === INTERRUPTED_BY_RESTART) return start$(plan, agent, task);
      return defer(() => evidenceOf(context, agent, ended)).pipe(map((evidence): Out => ({ type: 'task_completed', taskId: task.id, ...outcomeOf(ended.end), evidence })));
    };

    const executing = stateEffects({
      name: 'autonomyScheduler',
      machine: autonomyLoop,
      states: ['executing', 'blocked'],
      withState: true,
      effects: (view): EffectsByKey<typeof autonomyLoop> => {
        const plan = view.state!;
        const root = rootOfPlan(view.stream);
        if (root === undefined) return {};
        const { tasks } = plan;
        if (plan.value === 'blocked') {
          if (runnableTasks(tasks).length > 0) return { resolved: of({ type: 'dependency_resolved' as const }) };
          return { unresolvable: durableDeadline(view.at + blockedTimeoutMs, { type: 'unresolvable' as const, reason: blockedReason(plan, blockedTimeoutMs) }, context) };
        }
        if (allTasksTerminal(tasks)) return { terminal: of({ type: 'all_tasks_terminal' as const }) };
        if (allRunnableBlocked(tasks)) return { blocked: of({ type: 'all_runnable_blocked' as const }) };
        const due: Record<string, Observable<Out>> = {};
        const free = parallelism - tasks.filter(isTaskActive).length;
        for (const task of runnableTasks(tasks).slice(0, Math.max(0, free))) due[`assign:${task.id}#${task.attempts}`] = assign$(view.stream, root, task);
        for (const task of tasks) {
          if (task.agentId === undefined) continue;
          const agent = agentStreams(root, task.agentId);
          if (task.status === 'assigned') due[`start:${task.id}#${task.attempts}`] = start$(plan, agent, task);
          else if (task.status === 'running') due[`run:${task.id}#${task.attempts}@${task.turnNumber}`] = run$(plan, agent, task);
        }
        return due;
      },
    });
    return executing(runes$, context, deps);
  };
}

/** Why a blocked plan stops: the tasks that wait on failed ones, and the rule. */
function blockedReason(plan: AutonomyLoopState, blockedTimeoutMs: number): string {
  const failed = new Set(plan.tasks.filter((task) => task.status === 'failed').map((task) => task.id));
  const waiting = plan.tasks
    .filter((task) => task.status === 'pending')
    .map((task) => `"${task.id}" (on ${task.dependsOn.filter((id) => failed.has(id)).join(', ') || 'a blocked task'})`);
  return `blocked: ${waiting.join(', ')} wait on failed tasks; no retry_task within ${blockedTimeoutMs} ms (blockedTimeoutMs)`;
}
