import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VirtualTimeScheduler } from 'rxjs';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { agentCliSessions, type AgentCliSpec } from '../../../src/agents.js';
import { createEngine, type AgentManagerSessionState, type Engine, type Rune } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { quiet } from '../../support/virtual-time.js';
import { event, fakeAdapter, fakeSpec, until, type FakeStep } from './support.js';

/**
 * An interactive (ACP-like) CLI session while it waits for a person: its process is not idle, and
 * a process that exits while an approval is pending does not leave the session waiting on nothing.
 * Real processes of the fake CLI, through the engine on a real SQLite file.
 */

const dir = mkdtempSync(join(tmpdir(), 'runestream-cli-waiting-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

let files = 0;
/** An engine running the sessions epic with one CLI, `acp`, and its session `s1` (asking for approval); `state()` is its latest state. */
async function open(spec: AgentCliSpec, scheduler?: VirtualTimeScheduler) {
  const engine = createEngine({
    store: sqliteStore(join(dir, `waiting-${++files}.db`)),
    ...(scheduler === undefined ? {} : { scheduler }),
    epics: [agentCliSessions({ clis: { acp: spec }, defaultCli: 'acp' })],
  });
  engines.push(engine);
  const runes: Rune[] = [];
  engine.runes$().subscribe((rune) => runes.push(rune));
  await engine.spawn('s1', 'agent-manager-session');
  let latest: AgentManagerSessionState | undefined;
  engine.state$<AgentManagerSessionState>('s1').subscribe((s) => (latest = s));
  return { engine, runes, state: () => latest };
}

const created = (): FakeStep[] => [event({ type: 'session_created', sessionId: 'task-1' }), event({ type: 'api_req_started' })];
const done = (): FakeStep[] => [event({ type: 'ask:completion_result', text: 'done' })];
/** An interactive CLI whose first process asks `ask` and exits 0; a later one completes the task. */
const exitsAsking = (ask: FakeStep) =>
  fakeAdapter({
    interactive: true,
    script: (run) => (run.start.type === 'new_task' ? [...created(), ask, { exit: 0 }] : [event({ type: 'say:text', text: 'on it' }), ...done(), { exit: 0 }]),
  });

describe('an interactive CLI session waiting for a person', () => {
  it('is not ended as idle while it waits for an approval, an answer or the next message; the idle clock runs again once the CLI works (virtual time)', async () => {
    const scheduler = new VirtualTimeScheduler();
    const adapter = fakeAdapter({
      interactive: true,
      script: () => [
        ...created(),
        event({ type: 'ask:tool', text: 'write a.txt' }),
        { echo: 1 }, // the approval
        event({ type: 'ask:followup', text: 'More?' }),
        { echo: 1 }, // the answer
        ...done(),
        { echo: 1 }, // the next message, then it works on in silence
        { hang: true },
      ],
    });
    const { engine, runes, state } = await open(fakeSpec(adapter, { idleTimeoutMs: 120_000, killGraceMs: 1000 }), scheduler);
    /** Runs every timer due, as if the person took an hour, once the engine has heard all it dispatched. */
    const aPersonTakesTheirTime = async () => {
      await quiet(() => runes.length);
      scheduler.flush();
      await quiet(() => runes.length);
    };
    await engine.dispatch('s1', { type: 'start_session', prompt: 'write' });

    await until(engine, 's1', (s) => s.value === 'waiting_approval');
    await aPersonTakesTheirTime();
    expect(state()).toMatchObject({ value: 'waiting_approval' });
    await engine.dispatch('s1', { type: 'approve_action' });

    await until(engine, 's1', (s) => s.value === 'waiting_input');
    await aPersonTakesTheirTime();
    expect(state()).toMatchObject({ value: 'waiting_input' });
    await engine.dispatch('s1', { type: 'send_message', text: 'yes' });

    await until(engine, 's1', (s) => s.value === 'completed');
    await aPersonTakesTheirTime();
    expect(state()).toMatchObject({ value: 'completed' });
    await engine.dispatch('s1', { type: 'send_message', text: 'go on' });

    // Working again (streaming), the CLI prints nothing: now that is silence.
    await until(engine, 's1', (s) => s.lastText === 'heard: go on');
    await aPersonTakesTheirTime();
    expect((await until(engine, 's1', (s) => s.value === 'error')).error).toMatch(/^idle_timeout: ".*" printed no line for 120000 ms/);
    expect(adapter.runs).toHaveLength(1); // one process all along
  });

  it('that exits 0 while its approval is pending is paused, saying why; resume_session starts it again', async () => {
    const adapter = exitsAsking(event({ type: 'ask:tool', text: 'write a.txt' }));
    const { engine, state } = await open(fakeSpec(adapter));
    await engine.dispatch('s1', { type: 'start_session', prompt: 'write' });
    await until(engine, 's1', (s) => s.value === 'waiting_approval');
    await vi.waitFor(
      () =>
        expect(state()).toMatchObject({
          value: 'paused',
          exitCode: 0,
          error: 'the CLI exited (code 0) while its ask:tool awaited approval, so no process can be told the answer; resume_session starts it again',
        }),
      { timeout: 5000 },
    );
    await engine.dispatch('s1', { type: 'resume_session' });
    expect(await until(engine, 's1', (s) => s.value === 'completed' && s.exitCode === 0)).toMatchObject({ lastText: 'done' });
    expect(adapter.runs.map((run) => run.start)).toEqual([{ type: 'new_task', prompt: 'write' }, { type: 'resume' }]);
  });

  it('that exits 0 while its question is pending keeps waiting for the answer, which starts it again as a follow-up', async () => {
    const adapter = exitsAsking(event({ type: 'ask:followup', text: 'Which branch?' }));
    const { engine, runes, state } = await open(fakeSpec(adapter));
    await engine.dispatch('s1', { type: 'start_session', prompt: 'fix' });
    // The exit is recorded, and the question stays.
    await vi.waitFor(() => expect(state()).toMatchObject({ value: 'waiting_input', exitCode: 0, lastText: 'Which branch?' }), { timeout: 5000 });
    await engine.dispatch('s1', { type: 'send_message', text: 'main' });
    expect(await until(engine, 's1', (s) => s.value === 'completed' && s.exitCode === 0)).toMatchObject({ lastText: 'done' });
    expect(adapter.runs.map((run) => run.start)).toEqual([
      { type: 'new_task', prompt: 'fix' },
      { type: 'follow_up', text: 'main' },
    ]);
    expect(runes.filter((rune) => rune.stream === 's1').map((rune) => rune.to)).not.toContain('paused');
  });
});
