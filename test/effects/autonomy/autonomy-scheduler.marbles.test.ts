import { describe, expect, it } from 'vitest';
import { autonomyScheduler, scriptedModel } from '../../../src/agents.js';
import { planStream, type AutonomyLoopEvent } from '../../../src/index.js';
import { machineWorld, playEpic } from '../../support/frames.js';

/**
 * The scheduler alone in virtual time, on a log in memory played by the real machines: a blocked
 * plan's durable deadline, and what unblocks it.
 */

const PLAN = planStream('c1', 'p1');
const task = (id: string, dependsOn: string[] = []) => ({ id, description: `do ${id}`, dependsOn, priority: 0, ownerRole: 'dev' });

/** A plan blocked: `a` failed, `b` waits on it. */
function blockedPlan() {
  const w = machineWorld();
  w.spawn(PLAN, 'autonomy-loop', { goal: 'ship' });
  const events: AutonomyLoopEvent[] = [
    { type: 'decompose_goal', planId: 'p1', tasks: [task('a'), task('b', ['a'])] },
    { type: 'auto_start' },
    { type: 'task_assigned', taskId: 'a', agentId: 'dev-1' },
    { type: 'task_started', taskId: 'a', turnNumber: 1 },
    { type: 'task_completed', taskId: 'a', outcome: 'failure', result: 'broke' },
  ];
  for (const event of events) w.dispatch(PLAN, event);
  const play = playEpic(autonomyScheduler({ planner: scriptedModel([]), blockedTimeoutMs: 60_000 }), w.context(), w.scheduler);
  return { w, play };
}

describe('autonomyScheduler: blocked, in virtual time', () => {
  it('a blocked plan stops (unresolvable) blockedTimeoutMs after it was blocked, naming what waits on what', async () => {
    const { w, play } = blockedPlan();
    // Found executing at start with nothing runnable or running: blocked.
    expect(await play.send()).toEqual([{ stream: PLAN, event: { type: 'all_runnable_blocked' } }]);
    expect(await play.send(...w.run(play.frames.map((f) => f.command)))).toEqual([]);
    expect(w.value(PLAN)).toBe('blocked');
    w.scheduler.frame = 59_000;
    expect(await play.send()).toEqual([]);
    w.scheduler.frame = 61_000;
    expect(await play.send()).toEqual([
      { stream: PLAN, event: { type: 'unresolvable', reason: 'blocked: "b" (on a) wait on failed tasks; no retry_task within 60000 ms (blockedTimeoutMs)' }, by: 'timer' },
    ]);
  });

  it("an operator's retry_task makes a task runnable: dependency_resolved at once, and the deadline is gone", async () => {
    const { w, play } = blockedPlan();
    await play.send(...w.run((await play.send()).slice()));
    expect(w.value(PLAN)).toBe('blocked');
    const resolved = await play.send(w.dispatch(PLAN, { type: 'retry_task', taskId: 'a' }));
    expect(resolved).toEqual([{ stream: PLAN, event: { type: 'dependency_resolved' } }]);
    w.run(resolved);
    expect(w.value(PLAN)).toBe('executing');
    w.scheduler.frame = 120_000;
    expect((await play.send()).filter((c) => 'event' in c && c.event.type === 'unresolvable')).toEqual([]);
  });
});
