import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NEVER, filter, firstValueFrom, of } from 'rxjs';
import { afterAll, describe, expect, it } from 'vitest';
import { agentEpics, autonomyEpics, scriptedModel, type StructuredCaller } from '../../../src/agents.js';
import { checkInvariants, createEngine, planStream, type AutonomyLoopState, type EngineError } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { runAndKill } from '../../support/kill-worker.js';
import { storeLog } from '../../support/store-log.js';

const workerScript = fileURLToPath(new URL('../../fixtures/autonomy-crash-worker.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'runestream-autonomy-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const PLAN = planStream('c1', 'p1');

describe('autonomy crash: the process dies with SIGKILL mid-plan', () => {
  it('a fresh engine on the file finishes the plan; no task whose completion was logged runs again', async () => {
    const path = join(dir, 'plan.db');
    const run = await runAndKill(workerScript, [path]);
    expect(run.signal).toBe('SIGKILL');
    expect(run.stderr).not.toContain('autonomy-crash-worker:');
    expect(run.line).toMatch(/^streaming conv\/c1\/agent\/dev-1\/turn \d+$/);

    const store = sqliteStore(path);
    const before = await storeLog(store);
    const completedBefore = before.filter((r) => r.stream === PLAN && r.kind === 'plan.task_completed').map((r) => (r.payload as { taskId: string }).taskId);
    expect(completedBefore).toEqual(['a', 'b']);
    expect(before.filter((r) => r.stream === PLAN).at(-1)?.to).toBe('executing');

    // Only c is left: the workers answer it; a planner that is called fails the test (its script is empty).
    const planner = scriptedModel([]);
    const workers = scriptedModel([{ text: 'done c' }]);
    const critic = scriptedModel([{ text: '{"verdict":"pass","summary":"shipped"}' }]);
    const engine = createEngine({ store, epics: [...agentEpics({ model: workers }), ...autonomyEpics({ planner, critic, autoStart: true })] });
    const errors: EngineError[] = [];
    engine.errors$.subscribe((error) => errors.push(error));
    try {
      const done = await firstValueFrom(engine.state$<AutonomyLoopState>(PLAN).pipe(filter((s) => s.value === 'goal_met' || s.value === 'stopped')));
      expect(done).toMatchObject({ value: 'goal_met', summary: 'shipped' });
      expect(done.tasks.map((t) => [t.id, t.status, t.result])).toEqual([
        ['a', 'done', 'done a'],
        ['b', 'done', 'done b'],
        ['c', 'done', 'done c'],
      ]);
      const after = await storeLog(store);
      // Each task completed once in the plan; a and b ran one turn each; c's cut turn ran again once.
      const completed = after.filter((r) => r.stream === PLAN && r.kind === 'plan.task_completed').map((r) => (r.payload as { taskId: string }).taskId);
      expect(completed).toEqual(['a', 'b', 'c']);
      const turnsOf = (id: string) => after.filter((r) => r.kind === 'turn.started' && String((r.payload as { input?: string }).input).includes(`Task "${id}"`));
      expect([turnsOf('a').length, turnsOf('b').length, turnsOf('c').length]).toEqual([1, 1, 2]);
      const restarted = after.filter((r) => r.stream === PLAN && r.kind === 'plan.task_started').map((r) => r.payload);
      expect(restarted).toEqual([
        { taskId: 'a', turnNumber: 1 },
        { taskId: 'b', turnNumber: 2 },
        { taskId: 'c', turnNumber: 3 },
        { taskId: 'c', turnNumber: 4 },
      ]);
      expect(planner.doStreamCalls).toHaveLength(0);
      expect(workers.doStreamCalls).toHaveLength(1);
      expect(checkInvariants(after)).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await engine.close();
    }
  });
});

describe('autonomy restart: refused planner answers are in the log', () => {
  it("a restart goes on counting the planner's attempts (maxPlannerAttempts holds across restarts)", async () => {
    const path = join(dir, 'refused.db');
    const text = (t: string) => of({ type: 'part' as const, part: { type: 'text-delta' as const, text: t } });
    let calls = 0;
    // First process: the first answer is refused, the second call never answers (the process goes first).
    const first: StructuredCaller = () => (++calls === 1 ? text('I cannot plan that.') : NEVER);
    const a = createEngine({ store: sqliteStore(path), epics: autonomyEpics({ planner: first, maxPlannerAttempts: 2 }) });
    await a.spawn(PLAN, 'autonomy-loop', { goal: 'ship it' });
    await firstValueFrom(a.state$<AutonomyLoopState>(PLAN).pipe(filter((s) => s.refused !== undefined)));
    expect(calls).toBe(2);
    await a.close();

    // Second process: one attempt is left, and it is refused too.
    const asked: string[] = [];
    const second: StructuredCaller = () => {
      asked.push('plan');
      return text('Still no.');
    };
    const store = sqliteStore(path);
    const b = createEngine({ store, epics: autonomyEpics({ planner: second, maxPlannerAttempts: 2 }) });
    try {
      const done = await firstValueFrom(b.state$<AutonomyLoopState>(PLAN).pipe(filter((s) => s.value === 'stopped')));
      expect(done.reason).toMatch(/^planner: no valid answer in 2 attempts: not JSON: /);
      expect(asked).toEqual(['plan']);
      const log = await storeLog(store);
      expect(log.filter((r) => r.stream === PLAN).map((r) => r.kind)).toEqual(['plan.goal_received', 'plan.answer_refused', 'plan.stopped']);
      expect(log.find((r) => r.kind === 'plan.answer_refused')?.payload).toMatchObject({ question: 'plan@0', attempt: 1 });
    } finally {
      await b.close();
    }
  });
});
