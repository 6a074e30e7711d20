import { throwError, type Observable } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { autonomyCritic, autonomyPlanner, type StructuredCaller } from '../../../src/agents.js';
import type { ChainOutput, ModelRequest } from '../../../src/effects/llm/model-types.js';
import { planStream, type AutonomyLoopEvent, type EpicCommand, type PlanTaskInput, type Rune } from '../../../src/index.js';
import { machineWorld } from '../../support/frames.js';
import { marbleTest, type Marbles } from '../../support/marbles.js';

/**
 * The planner and the critic alone, under `TestScheduler.run`: the plan is a log in memory played
 * by the real machine (found by the epic's listing at frame 0), the model is a caller returning
 * cold observables, as `agentModel`'s tests do. Each test checks the commands, their frames, and
 * when each model call was subscribed and unsubscribed.
 */

const PLAN = planStream('c1', 'p1');
const ROOT = 'conv/c1';
const task = (id: string, dependsOn: string[] = []): PlanTaskInput => ({ id, description: `do ${id}`, dependsOn, priority: 0, ownerRole: 'dev' });
const withDefaults = (t: PlanTaskInput) => ({ dependsOn: [], priority: 0, ...t });

const text = (t: string): ChainOutput => ({ type: 'part', part: { type: 'text-delta', text: t } });
const finish: ChainOutput = { type: 'part', part: { type: 'finish', finishReason: 'stop' } };
const toPlan = (event: AutonomyLoopEvent): EpicCommand => ({ stream: PLAN, event });

/** A caller answering call n with `answers[n]`, recording each request. */
function caller(answers: readonly Observable<ChainOutput>[]) {
  const requests: ModelRequest[] = [];
  const call: StructuredCaller = (request) => {
    requests.push(request);
    return answers[requests.length - 1] ?? throwError(() => new Error(`no answer for call ${requests.length}`));
  };
  return { call, requests };
}

/** The text of a request's messages after the first (what the model is told when asked again). */
const followUps = (request: ModelRequest | undefined): string => JSON.stringify(request?.messages.slice(1));

/** A plan in `goal_received`, in a world on the test's scheduler. */
function goalWorld(m: Marbles) {
  const w = machineWorld(m.scheduler);
  w.spawn(PLAN, 'autonomy-loop', { goal: 'ship it' });
  return w;
}

/** A plan in `reviewing`: `a` done, `b` failed (run `bRuns` times). */
function reviewWorld(m: Marbles, bRuns = 1) {
  const w = goalWorld(m);
  w.dispatch(PLAN, { type: 'decompose_goal', planId: 'p1', tasks: [task('a'), task('b')].map(withDefaults) });
  w.dispatch(PLAN, { type: 'auto_start' });
  for (const [id, outcome] of [['a', 'success'] as const, ...Array.from({ length: bRuns }, () => ['b', 'failure'] as const)]) {
    w.dispatch(PLAN, { type: 'task_assigned', taskId: id, agentId: 'dev-1' });
    w.dispatch(PLAN, { type: 'task_started', taskId: id, turnNumber: 1 });
    w.dispatch(PLAN, { type: 'task_completed', taskId: id, outcome, result: outcome === 'success' ? `done ${id}` : `${id} broke` });
    if (id === 'b' && w.value(PLAN) === 'executing' && bRuns > 1) {
      w.dispatch(PLAN, { type: 'all_tasks_terminal' });
      w.dispatch(PLAN, { type: 'critique_found_issues', findings: 'b broke', retry: ['b'] });
      bRuns--;
    }
  }
  w.dispatch(PLAN, { type: 'all_tasks_terminal' });
  expect(w.value(PLAN)).toBe('reviewing');
  return w;
}

/** A rune of the plan leaving for `stopped` (a user's cancel), as the engine would send it live. */
const cancelled = (seq: number, from: string): Rune => ({
  stream: PLAN,
  seq,
  machine: 'autonomy-loop',
  kind: 'plan.stopped',
  event: { type: 'user_cancel' },
  from,
  to: 'stopped',
  at: 0,
  payload: { reason: 'user_cancel' },
});

describe('autonomyPlanner under virtual time', () => {
  it('a goal: the conversation is created and the planner asked at once; its answer, when the call ends, is decompose_goal (plan.created)', () =>
    marbleTest((m) => {
      const w = goalWorld(m);
      const answer = m.cold<ChainOutput>('--a-b-(f|)', { a: text('{"tasks":[{"id":"a","description":"do a",'), b: text('"ownerRole":"dev"}]}'), f: finish });
      const { call, requests } = caller([answer]);
      const runes = m.hot<Rune>('-');
      m.expectObservable(autonomyPlanner({ planner: call })(runes, w.context(), undefined)).toBe('(sr)--d', {
        s: { stream: ROOT, spawn: 'conversation', input: { conversationId: 'c1' } },
        r: { stream: ROOT, event: { type: 'agent_ready' } },
        d: toPlan({ type: 'decompose_goal', planId: 'p1', tasks: [withDefaults(task('a'))] }),
      });
      m.expectSubscriptions(answer.subscriptions).toBe('^-----!');
      return () => {
        expect(requests).toHaveLength(1);
        expect(JSON.stringify(requests[0]!.messages)).toContain('ship it');
      };
    }));

  it('an answer that is not JSON (a refusal) is refused (plan.answer_refused) and asked again with the error; a cycle too; then planner_failed names the last problem', () =>
    marbleTest((m) => {
      const w = goalWorld(m);
      w.spawn(ROOT, 'conversation', { conversationId: 'c1' }); // there already: not created again
      const refusal = m.cold<ChainOutput>('-(a|)', { a: text('I cannot help with that.') });
      const cycle = m.cold<ChainOutput>('--(a|)', { a: text(JSON.stringify({ tasks: [task('a', ['b']), task('b', ['a'])] })) });
      const { call, requests } = caller([refusal, cycle]);
      const runes = m.hot<Rune>('-');
      m.expectObservable(autonomyPlanner({ planner: call, maxPlannerAttempts: 2 })(runes, w.context(), undefined)).toBe('-r-f', {
        r: toPlan({ type: 'answer_refused', question: 'plan@0', error: expect.stringMatching(/^not JSON: /) as unknown as string }),
        f: toPlan({ type: 'planner_failed', reason: 'planner: no valid answer in 2 attempts: the plan has a dependency cycle: a -> b -> a' }),
      });
      m.expectSubscriptions(refusal.subscriptions).toBe('^!');
      m.expectSubscriptions(cycle.subscriptions).toBe('-^-!');
      return () => {
        expect(requests).toHaveLength(2);
        expect(followUps(requests[1])).toContain('I cannot help with that.');
        expect(followUps(requests[1])).toContain('That answer was refused: not JSON');
      };
    }));

  it('refusals the log holds (a process died asking) count: the planner goes on from the next attempt, and with none left fails at once', () =>
    marbleTest((m) => {
      const w = goalWorld(m);
      w.spawn(ROOT, 'conversation', { conversationId: 'c1' });
      w.dispatch(PLAN, { type: 'answer_refused', question: 'plan@0', error: 'not JSON: Unexpected token' });
      const cycle = m.cold<ChainOutput>('-(a|)', { a: text(JSON.stringify({ tasks: [task('a', ['a'])] })) });
      const one = caller([cycle]);
      m.expectObservable(autonomyPlanner({ planner: one.call, maxPlannerAttempts: 2 })(m.hot<Rune>('-'), w.context(), undefined)).toBe('-f', {
        f: toPlan({ type: 'planner_failed', reason: 'planner: no valid answer in 2 attempts: the plan has a dependency cycle: a -> a' }),
      });
      m.expectSubscriptions(cycle.subscriptions).toBe('^!');
      const none = caller([]);
      m.expectObservable(autonomyPlanner({ planner: none.call, maxPlannerAttempts: 1 })(m.hot<Rune>('-'), w.context(), undefined)).toBe('f', {
        f: toPlan({ type: 'planner_failed', reason: 'planner: no valid answer in 1 attempt: not JSON: Unexpected token' }),
      });
      return () => {
        expect(one.requests).toHaveLength(1);
        expect(none.requests).toEqual([]);
      };
    }));

  it('a failed call counts as an attempt; with none left, planner_failed says the call failed', () =>
    marbleTest((m) => {
      const w = goalWorld(m);
      w.spawn(ROOT, 'conversation', { conversationId: 'c1' });
      const failing = m.cold<ChainOutput>('-#', {}, new Error('all providers failed: model: HTTP 503'));
      const { call } = caller([failing]);
      m.expectObservable(autonomyPlanner({ planner: call, maxPlannerAttempts: 1 })(m.hot<Rune>('-'), w.context(), undefined)).toBe('-f', {
        f: toPlan({ type: 'planner_failed', reason: 'planner: no valid answer in 1 attempt: the model call failed: all providers failed: model: HTTP 503' }),
      });
      m.expectSubscriptions(failing.subscriptions).toBe('^!');
    }));

  it("a user's cancel while the planner is asked unsubscribes the call at that frame; nothing is emitted for it", () =>
    marbleTest((m) => {
      const w = goalWorld(m);
      w.spawn(ROOT, 'conversation', { conversationId: 'c1' });
      const slow = m.cold<ChainOutput>('-----(a|)', { a: text(JSON.stringify({ tasks: [task('a')] })) });
      const { call } = caller([slow]);
      const runes = m.hot<Rune>('--c', { c: cancelled(2, 'goal_received') });
      m.expectObservable(autonomyPlanner({ planner: call })(runes, w.context(), undefined)).toBe('-------');
      m.expectSubscriptions(slow.subscriptions).toBe('^-!');
    }));

  it("after the critic's needs_replan: asked with the findings and the tasks' results, the answer is plan_revised (plan.updated)", () =>
    marbleTest((m) => {
      const w = reviewWorld(m);
      w.dispatch(PLAN, { type: 'needs_replan', findings: 'b is the wrong approach' });
      expect(w.state<{ replanning?: boolean }>(PLAN)?.replanning).toBe(true);
      const answer = m.cold<ChainOutput>('-(a|)', { a: text(JSON.stringify({ tasks: [task('a'), task('c', ['a'])] })) });
      const { call, requests } = caller([answer]);
      m.expectObservable(autonomyPlanner({ planner: call })(m.hot<Rune>('-'), w.context(), undefined)).toBe('-r', {
        r: toPlan({ type: 'plan_revised', tasks: [withDefaults(task('a')), withDefaults(task('c', ['a']))] }),
      });
      m.expectSubscriptions(answer.subscriptions).toBe('^!');
      return () => {
        const asked = JSON.stringify(requests[0]!.messages);
        expect(asked).toContain('b is the wrong approach');
        expect(asked).toContain('done a');
      };
    }));

  it('a ready plan auto-starts with autoStart, and the planner is not called', () =>
    marbleTest((m) => {
      const w = goalWorld(m);
      w.dispatch(PLAN, { type: 'decompose_goal', planId: 'p1', tasks: [withDefaults(task('a'))] });
      const { call, requests } = caller([]);
      m.expectObservable(autonomyPlanner({ planner: call, autoStart: true })(m.hot<Rune>('-'), w.context(), undefined)).toBe('a', { a: toPlan({ type: 'auto_start' }) });
      return () => expect(requests).toEqual([]);
    }));
});

describe('autonomyCritic under virtual time', () => {
  it('pass: critique_passed with the summary (plan.goal_met) when the verdict has been streamed', () =>
    marbleTest((m) => {
      const w = reviewWorld(m);
      const answer = m.cold<ChainOutput>('-a-b-(f|)', { a: text('{"verdict":"pass",'), b: text('"summary":"shipped"}'), f: finish });
      const { call, requests } = caller([answer]);
      m.expectObservable(autonomyCritic({ planner: call })(m.hot<Rune>('-'), w.context(), undefined)).toBe('-----p', {
        p: toPlan({ type: 'critique_passed', summary: 'shipped' }),
      });
      m.expectSubscriptions(answer.subscriptions).toBe('^----!');
      return () => {
        const asked = JSON.stringify(requests[0]!.messages);
        expect(asked).toContain('ship it');
        expect(asked).toContain('b broke');
      };
    }));

  it('retry: critique_found_issues with the named failed task (it runs again); an unknown task id is asked again first', () =>
    marbleTest((m) => {
      const w = reviewWorld(m);
      const unknown = m.cold<ChainOutput>('-(a|)', { a: text('{"verdict":"retry","findings":"z broke","tasks":["z"]}') });
      const retry = m.cold<ChainOutput>('-(a|)', { a: text('{"verdict":"retry","findings":"b broke","tasks":["b"]}') });
      const { call, requests } = caller([unknown, retry]);
      m.expectObservable(autonomyCritic({ planner: call })(m.hot<Rune>('-'), w.context(), undefined)).toBe('-xr', {
        x: toPlan({ type: 'answer_refused', question: 'review@0.2', error: 'task "z" is not a task of the plan; its tasks are a, b' }),
        r: toPlan({ type: 'critique_found_issues', findings: 'b broke', retry: ['b'] }),
      });
      m.expectSubscriptions(unknown.subscriptions).toBe('^!');
      m.expectSubscriptions(retry.subscriptions).toBe('-^!');
      return () => expect(followUps(requests[1])).toContain('task \\"z\\" is not a task of the plan; its tasks are a, b');
    }));

  it('retry of a task that ran maxTaskAttempts times: unresolvable, naming it (plan.stopped)', () =>
    marbleTest((m) => {
      const w = reviewWorld(m, 2);
      const retry = m.cold<ChainOutput>('-(a|)', { a: text('{"verdict":"retry","findings":"b broke again","tasks":["b"]}') });
      const { call } = caller([retry]);
      // A refusal of an earlier review (one task completion ago) is not this review's.
      w.dispatch(PLAN, { type: 'answer_refused', question: 'review@0.2', error: 'not JSON' });
      m.expectObservable(autonomyCritic({ planner: call, maxTaskAttempts: 2, maxPlannerAttempts: 1 })(m.hot<Rune>('-'), w.context(), undefined)).toBe('-u', {
        u: toPlan({ type: 'unresolvable', reason: 'critic: b broke again; "b" ran 2 times (maxTaskAttempts)' }),
      });
    }));

  it('replan: needs_replan with the findings; past maxReplans, unresolvable', () =>
    marbleTest((m) => {
      const replan = () => m.cold<ChainOutput>('-(a|)', { a: text('{"verdict":"replan","findings":"wrong approach"}') });
      const w = reviewWorld(m);
      const first = caller([replan()]);
      m.expectObservable(autonomyCritic({ planner: first.call })(m.hot<Rune>('-'), w.context(), undefined)).toBe('-n', {
        n: toPlan({ type: 'needs_replan', findings: 'wrong approach' }),
      });
      const none = caller([replan()]);
      m.expectObservable(autonomyCritic({ planner: none.call, maxReplans: 0 })(m.hot<Rune>('-'), w.context(), undefined)).toBe('-u', {
        u: toPlan({ type: 'unresolvable', reason: 'critic: the plan needs changing (wrong approach), and its 0 replans (maxReplans) are used up' }),
      });
    }));

  it('the critic has its own caller when given one; the planner caller is not called', () =>
    marbleTest((m) => {
      const w = reviewWorld(m);
      const planner = caller([]);
      const critic = caller([m.cold<ChainOutput>('-(a|)', { a: text('{"verdict":"pass","summary":"ok"}') })]);
      m.expectObservable(autonomyCritic({ planner: planner.call, critic: critic.call })(m.hot<Rune>('-'), w.context(), undefined)).toBe('-p', {
        p: toPlan({ type: 'critique_passed', summary: 'ok' }),
      });
      return () => {
        expect(planner.requests).toEqual([]);
        expect(critic.requests).toHaveLength(1);
      };
    }));
});
