import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { filter, firstValueFrom } from 'rxjs';
import { agentEpics, autonomyEpics, scriptedModel } from '../src/agents.js';
import { agentStreams, createEngine, planStream, type AutonomyLoopState, type TurnEngineState } from '../src/index.js';
import { sqliteStore } from '../src/sqlite.js';
import { percentile } from './harness.js';

/** The figures: a 100-task plan over 10 agents. Task i depends on task i - 10: 10 waves of 10. */
const TASKS = 100;
const AGENTS = 10;
/** The loop's time per task may be at most this many times the anchor's (the same turns started directly). */
const BAR = 4;

const fmt = (n: number, digits = 2): string => n.toFixed(digits);
const tasks = Array.from({ length: TASKS }, (_, i) => ({ id: `t${i}`, description: `task ${i}`, dependsOn: i >= AGENTS ? [`t${i - AGENTS}`] : [], ownerRole: 'worker' }));

/**
 * The candidate: `autonomyEpics` + `agentEpics` on a SQLite file, the planner answering the plan at
 * once (auto-started), every worker answering `ok`. Per task: the time from it becoming runnable
 * (its dependency's `plan.task_completed`, or `auto_start` for the first wave) to its agent's
 * `turn.started`; and the plan's time from `auto_start` to `all_tasks_terminal`, per task.
 */
async function loopRun(dir: string): Promise<{ perTaskMs: number; waits: number[] }> {
  const planner = scriptedModel([{ text: JSON.stringify({ tasks }) }]);
  const critic = scriptedModel([{ text: '{"verdict":"pass","summary":"done"}' }]);
  const workers = scriptedModel([{ text: 'ok' }], { whenExhausted: 'cycle', keepCalls: 0 });
  const engine = createEngine({
    store: sqliteStore(join(dir, 'loop.db')),
    epics: [...agentEpics({ model: workers }), ...autonomyEpics({ planner, critic, autoStart: true, parallelism: AGENTS })],
  });
  const runnableAt = new Map<string, number>();
  const waits: number[] = [];
  let startedAt = 0;
  let endedAt = 0;
  engine.runes$().subscribe((rune) => {
    const now = performance.now();
    if (rune.kind === 'auto_start') {
      startedAt = now;
      for (const task of tasks.slice(0, AGENTS)) runnableAt.set(task.id, now);
    } else if (rune.kind === 'plan.task_completed') {
      const i = Number((rune.payload as { taskId: string }).taskId.slice(1));
      if (i + AGENTS < TASKS) runnableAt.set(`t${i + AGENTS}`, now);
    } else if (rune.kind === 'turn.started' && rune.stream.endsWith('/turn')) {
      const id = /Task "([^"]+)"/.exec((rune.payload as { input: string }).input)?.[1];
      if (id !== undefined && runnableAt.has(id)) waits.push(now - runnableAt.get(id)!);
    } else if (rune.kind === 'all_tasks_terminal') endedAt = now;
  });
  const plan = planStream('bench', 'p1');
  await engine.spawn(plan, 'autonomy-loop', { goal: 'a hundred tasks' });
  const done = await firstValueFrom(engine.state$<AutonomyLoopState>(plan).pipe(filter((s) => s.value === 'goal_met' || s.value === 'stopped')));
  await engine.close();
  if (done.value !== 'goal_met' || waits.length !== TASKS) throw new Error(`the plan ended ${done.value} (${done.reason ?? ''}) with ${waits.length} task turns`);
  return { perTaskMs: (endedAt - startedAt) / TASKS, waits: waits.sort((a, b) => a - b) };
}

/** The anchor: the same 100 turns on 10 agents, started directly (10 waves of 10, each wave after the last), no loop. */
async function directRun(dir: string): Promise<number> {
  const workers = scriptedModel([{ text: 'ok' }], { whenExhausted: 'cycle', keepCalls: 0 });
  const engine = createEngine({ store: sqliteStore(join(dir, 'direct.db')), epics: agentEpics({ model: workers }) });
  const agents = Array.from({ length: AGENTS }, (_, i) => agentStreams('conv/direct', `worker-${i + 1}`));
  for (const agent of agents) await engine.spawn(agent.turn, 'turn-engine', { agentId: agent.agentId });
  const start = performance.now();
  for (let wave = 0; wave < TASKS / AGENTS; wave++) {
    await Promise.all(
      agents.map(async (agent) => {
        await firstValueFrom(engine.state$<TurnEngineState>(agent.turn).pipe(filter((s) => s.value === 'idle')));
        const idle = firstValueFrom(engine.state$<TurnEngineState>(agent.turn).pipe(filter((s) => s.value === 'idle' && s.turn === wave + 1)));
        await engine.dispatch(agent.turn, { type: 'start_turn', input: `task ${wave}` });
        await idle;
      }),
    );
  }
  const perTask = (performance.now() - start) / TASKS;
  await engine.close();
  return perTask;
}

/** `npm run bench -- autonomy`: the loop's scheduling overhead per task, against the same turns started directly. */
export async function benchAutonomy(): Promise<boolean> {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-bench-autonomy-'));
  try {
    let best: Awaited<ReturnType<typeof loopRun>> | undefined;
    let anchor = Infinity;
    for (let round = 0; round < 3; round++) {
      const loop = await loopRun(dir);
      if (best === undefined || loop.perTaskMs < best.perTaskMs) best = loop;
      anchor = Math.min(anchor, await directRun(dir));
      rmSync(join(dir, 'loop.db'), { force: true });
      rmSync(join(dir, 'direct.db'), { force: true });
    }
    const ratio = best!.perTaskMs / anchor;
    const ok = ratio <= BAR;
    console.log(`\nautonomy loop: a ${TASKS}-task plan over ${AGENTS} agents (scripted model, SQLite), best of 3`);
    console.log(
      `  runnable -> turn started per task: p50 ${fmt(percentile(best!.waits, 50))} ms, p95 ${fmt(percentile(best!.waits, 95))} ms, max ${fmt(best!.waits.at(-1)!)} ms`,
    );
    console.log(`  engine time per task, with the loop         ${fmt(best!.perTaskMs).padStart(8)} ms`);
    console.log(`  the same turns started directly (anchor)    ${fmt(anchor).padStart(8)} ms`);
    console.log(`  ratio ${ratio.toFixed(1)}x (bar: <= ${BAR}x)  ${ok ? 'PASS' : 'FAIL'}`);
    return ok;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
