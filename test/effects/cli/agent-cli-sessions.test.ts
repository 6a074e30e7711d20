import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VirtualTimeScheduler, filter, firstValueFrom, type SchedulerLike } from 'rxjs';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import {
  agentCliSessions,
  inProcessCli,
  type AgentCliAdapter,
  PROCESS_LOST_REASON,
  type AgentCliSpec,
  type CliProcessOptions,
  type CliSpawnContext,
  type SpawnCliProcess,
} from '../../../src/agents.js';
import { createEngine, type Engine, type EngineError, type Rune } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { stepsProgram } from './cli-process-contract.js';
import { childPidOf, event, fakeAdapter, fakeSpec, isRunning, until, type FakeStep } from './support.js';

/** Agent CLI sessions through the engine on a real SQLite file, each run a real process of the fake CLI. */

const dir = mkdtempSync(join(tmpdir(), 'runestream-cli-sessions-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const engines: Engine[] = [];
const pids: number[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
  for (const pid of pids.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
});

let files = 0;
/** An engine on a new SQLite file (or `file`) running the sessions epic with `clis`. */
function open(clis: Record<string, AgentCliSpec>, options: { file?: string; scheduler?: SchedulerLike; defaultCli?: string; spawnProcess?: SpawnCliProcess } = {}) {
  const file = options.file ?? join(dir, `sessions-${++files}.db`);
  const engine = createEngine({
    store: sqliteStore(file),
    ...(options.scheduler === undefined ? {} : { scheduler: options.scheduler }),
    epics: [
      agentCliSessions({
        clis,
        defaultCli: options.defaultCli ?? Object.keys(clis)[0],
        ...(options.spawnProcess === undefined ? {} : { spawnProcess: options.spawnProcess }),
      }),
    ],
  });
  engines.push(engine);
  const errors: EngineError[] = [];
  engine.errors$.subscribe((error) => errors.push(error));
  const runes: Rune[] = [];
  engine.runes$().subscribe((rune) => runes.push(rune));
  return { engine, file, errors, runes };
}

/** `kind -> to` of each rune of a stream, for the seed's transitions. */
const path = (runes: readonly Rune[], stream = 's1'): string[] => runes.filter((r) => r.stream === stream).map((r) => `${r.kind}->${r.to}`);

const created = (sessionId = 'task-1', ts = 1000): FakeStep[] => [event({ type: 'session_created', sessionId }), event({ type: 'api_req_started', ts })];
const done = (ts: number): FakeStep[] => [event({ type: 'say:completion_result', text: 'done', ts }), event({ type: 'ask:completion_result', ts: ts + 1 })];

describe('agentCliSessions', () => {
  it('runs a session from start_session to completed; a garbage line is told on errors$ as output_ignored', async () => {
    const adapter = fakeAdapter({
      interactive: false,
      script: () => [...created(), { line: 'SIGTERM received, shutting down...' }, event({ type: 'say:text', text: 'working', ts: 1001 }), ...done(1002)],
    });
    const { engine, errors, runes } = open({ fake: fakeSpec(adapter) });
    await engine.spawn('s1', 'agent-manager-session', { autoApprove: true });
    await engine.dispatch('s1', { type: 'start_session', prompt: 'build it' });
    expect(await until(engine, 's1', (s) => s.value === 'completed')).toMatchObject({ value: 'completed', sessionId: 'task-1', lastText: 'done' });
    expect(adapter.runs).toEqual([{ start: { type: 'new_task', prompt: 'build it' }, autoApprove: true, cwd: process.cwd() }]);
    expect(path(runes).slice(0, 7)).toEqual([
      'spawned->idle',
      'start_session->creating',
      'session_created->creating',
      'api_req_started->streaming',
      'say:text->streaming',
      'say:completion_result->streaming',
      'ask:completion_result->completed',
    ]);
    await vi.waitFor(() =>
      expect(errors).toContainEqual({ type: 'output_ignored', epic: 'agentCliSessions', stream: 's1', reason: 'not JSON: SIGTERM received, shutting down...' }),
    );
  });

  it('non-interactive: a follow-up is a new process told the sessionId and the last ts in the log', async () => {
    const adapter = fakeAdapter({
      interactive: false,
      script: (run) =>
        run.start.type === 'new_task'
          ? [...created('task-7', 500), event({ type: 'ask:followup', text: 'Which branch?', ts: 501 }), { hang: true }]
          : [event({ type: 'say:text', text: 'old history', ts: 400 }), event({ type: 'say:text', text: 'on main', ts: 502 }), ...done(503)],
    });
    const { engine, runes } = open({ fake: fakeSpec(adapter) });
    await engine.spawn('s1', 'agent-manager-session', { autoApprove: true });
    await engine.dispatch('s1', { type: 'start_session', prompt: 'fix' });
    await until(engine, 's1', (s) => s.value === 'waiting_input'); // the first process is ended: it cannot be answered
    await engine.dispatch('s1', { type: 'send_message', text: 'main' });
    expect((await until(engine, 's1', (s) => s.value === 'completed')).lastText).toBe('done');
    expect(adapter.runs[1]).toEqual({ start: { type: 'follow_up', text: 'main' }, sessionId: 'task-7', afterTs: 501, autoApprove: true, cwd: process.cwd() });
    expect(path(runes)).toContain('send_message->streaming');
  });

  it('interactive: the process lives across turns and hears approve_action and send_message through user$', async () => {
    const adapter = fakeAdapter({
      interactive: true,
      script: () => [
        ...created(),
        event({ type: 'ask:tool', text: 'write a.txt' }),
        { echo: 1 }, // the approval, answered as a line
        event({ type: 'ask:followup', text: 'More?' }),
        { echo: 1 }, // the message
        ...done(2000),
        { hang: true },
      ],
    });
    const { engine, runes } = open({ acp: fakeSpec(adapter) });
    await engine.spawn('s1', 'agent-manager-session');
    await engine.dispatch('s1', { type: 'start_session', prompt: 'write' });
    await until(engine, 's1', (s) => s.value === 'waiting_approval');
    await engine.dispatch('s1', { type: 'approve_action' });
    await until(engine, 's1', (s) => s.value === 'waiting_input');
    await engine.dispatch('s1', { type: 'send_message', text: 'yes' });
    await until(engine, 's1', (s) => s.value === 'completed');
    expect(adapter.runs).toHaveLength(1); // one process for every turn
    const said = runes.filter((r) => r.kind === 'say:text').map((r) => (r.event as { text?: string }).text);
    expect(said).toEqual(['approve_action', 'heard: yes']);
  });

  it('interactive: a new start_session from completed ends the live process and starts another; a message after the process exited starts a follow-up', async () => {
    const adapter = fakeAdapter({
      interactive: true,
      script: (run) =>
        run.start.type === 'new_task' && run.start.prompt === 'first'
          ? [...created('task-1'), { child: true }, ...done(10), { hang: true }]
          : run.start.type === 'new_task'
            ? [...created('task-2'), ...done(20), { exit: 0 }]
            : [event({ type: 'say:text', text: 'again' }), ...done(30), { exit: 0 }],
    });
    const { engine } = open({ acp: fakeSpec(adapter, { killGraceMs: 200 }) });
    await engine.spawn('s1', 'agent-manager-session');
    await engine.dispatch('s1', { type: 'start_session', prompt: 'first' });
    const child = childPidOf((await until(engine, 's1', (s) => s.lastText?.startsWith('child:') === true)).lastText);
    pids.push(child);
    await until(engine, 's1', (s) => s.value === 'completed');
    await engine.dispatch('s1', { type: 'start_session', prompt: 'second' });
    await vi.waitFor(() => expect(isRunning(child)).toBe(false)); // the first process, and its child, ended
    await until(engine, 's1', (s) => s.value === 'completed' && s.sessionId === 'task-2' && s.exitCode === 0); // its process exited
    await engine.dispatch('s1', { type: 'send_message', text: 'more' });
    await until(engine, 's1', (s) => s.value === 'completed' && s.lastText === 'done' && adapter.runs.length === 3);
    expect(adapter.runs.map((run) => run.start)).toEqual([
      { type: 'new_task', prompt: 'first' },
      { type: 'new_task', prompt: 'second' },
      { type: 'follow_up', text: 'more' },
    ]);
  });

  it('cancel_session ends the process and its children, and nothing more of that run is dispatched', async () => {
    const adapter = fakeAdapter({ interactive: false, script: () => [...created(), { child: true }, { hang: true }] });
    const { engine, runes } = open({ fake: fakeSpec(adapter, { killGraceMs: 200 }) });
    await engine.spawn('s1', 'agent-manager-session', { autoApprove: true });
    await engine.dispatch('s1', { type: 'start_session', prompt: 'go' });
    const child = childPidOf((await until(engine, 's1', (s) => s.lastText?.startsWith('child:') === true)).lastText);
    pids.push(child);
    expect(isRunning(child)).toBe(true);
    await engine.dispatch('s1', { type: 'cancel_session' });
    await vi.waitFor(() => expect(isRunning(child)).toBe(false));
    expect(path(runes).at(-1)).toBe('cancel_session->stopped');
    expect((await until(engine, 's1', () => true)).value).toBe('stopped');
  });

  it('a CLI silent for idleTimeoutMs gets process_error idle_timeout (virtual time)', async () => {
    const scheduler = new VirtualTimeScheduler();
    const adapter = fakeAdapter({ interactive: false, script: () => [...created(), { hang: true }] });
    const { engine } = open({ fake: fakeSpec(adapter, { idleTimeoutMs: 120_000, killGraceMs: 1000 }) }, { scheduler });
    await engine.spawn('s1', 'agent-manager-session', { autoApprove: true });
    await engine.dispatch('s1', { type: 'start_session', prompt: 'go' });
    await until(engine, 's1', (s) => s.value === 'streaming');
    scheduler.flush();
    expect((await until(engine, 's1', (s) => s.value === 'error')).error).toMatch(/^idle_timeout: ".*" printed no line for 120000 ms/);
  });

  it('a command that cannot start gets process_error spawn_failed naming it', async () => {
    const adapter = fakeAdapter({ interactive: false, script: () => [] });
    const { engine } = open({ fake: { adapter, command: 'runestream-no-such-cli', cwd: process.cwd() } });
    await engine.spawn('s1', 'agent-manager-session', { autoApprove: true });
    await engine.dispatch('s1', { type: 'start_session', prompt: 'go' });
    expect((await until(engine, 's1', (s) => s.value === 'error')).error).toMatch(/^spawn_failed: could not start "runestream-no-such-cli" in .*ENOENT/);
  });

  it('a non-zero exit is an error with its code and the end of its stderr', async () => {
    const adapter = fakeAdapter({ interactive: false, script: () => [...created(), { stderr: 'model not found' }, { exit: 2 }] });
    const { engine, runes } = open({ fake: fakeSpec(adapter) });
    await engine.spawn('s1', 'agent-manager-session', { autoApprove: true });
    await engine.dispatch('s1', { type: 'start_session', prompt: 'go' });
    await until(engine, 's1', (s) => s.exitCode !== undefined);
    expect(await until(engine, 's1', () => true)).toMatchObject({ value: 'error', exitCode: 2, error: 'exit_code: "fake" exited with code 2: model not found' });
    expect(path(runes).slice(-2)).toEqual(['process_error->error', 'process_exit->error']);
  });

  it('refuses a session naming an unknown CLI (unknown_cli), and a one-shot CLI without auto-approve (approval_unsupported)', async () => {
    const adapter = fakeAdapter({ interactive: false, script: () => [] });
    const { engine } = open({ fake: fakeSpec(adapter), other: fakeSpec(adapter) });
    await engine.spawn('s1', 'agent-manager-session', { cli: 'nope', autoApprove: true });
    await engine.dispatch('s1', { type: 'start_session', prompt: 'go' });
    expect((await until(engine, 's1', (s) => s.value === 'error')).error).toBe('unknown_cli: no agent CLI "nope" is configured; the configured ones are: fake, other');
    await engine.spawn('s2', 'agent-manager-session', { cli: 'other' });
    await engine.dispatch('s2', { type: 'start_session', prompt: 'go' });
    expect((await until(engine, 's2', (s) => s.value === 'error')).error).toMatch(
      /^approval_unsupported: "other" \(ndjson\) cannot be answered while it runs.*autoApprove: true.*ACP/,
    );
    expect(adapter.runs).toEqual([]); // no process ran
  });

  it('at most maxRunningSessions processes run: a session past it is error too_many_sessions with no process; retry runs it once one has ended', async () => {
    const adapter = fakeAdapter({
      interactive: false,
      script: (run) => (run.start.type === 'new_task' && run.start.prompt === 'first' ? [...created(), { hang: true }] : [...created(), ...done(5)]),
    });
    const engine = createEngine({
      store: sqliteStore(join(dir, `sessions-${++files}.db`)),
      epics: [agentCliSessions({ clis: { fake: fakeSpec(adapter, { killGraceMs: 200 }) }, defaultCli: 'fake', maxRunningSessions: 1 })],
    });
    engines.push(engine);
    await engine.spawn('s1', 'agent-manager-session', { autoApprove: true });
    await engine.dispatch('s1', { type: 'start_session', prompt: 'first' });
    await until(engine, 's1', (s) => s.value === 'streaming'); // its process runs until it is ended
    await engine.spawn('s2', 'agent-manager-session', { autoApprove: true });
    await engine.dispatch('s2', { type: 'start_session', prompt: 'second' });
    expect((await until(engine, 's2', (s) => s.value === 'error')).error).toBe(
      'too_many_sessions: 1 agent CLI sessions run now, at most 1 at once (maxRunningSessions); no process was started: retry once one has ended',
    );
    expect(adapter.runs).toHaveLength(1);
    await engine.dispatch('s1', { type: 'cancel_session' }); // its process ends
    await engine.dispatch('s2', { type: 'retry' });
    expect((await until(engine, 's2', (s) => s.value === 'completed')).lastText).toBe('done');
    expect(adapter.runs).toHaveLength(2);
    expect(() => agentCliSessions({ clis: {}, maxRunningSessions: 0 })).toThrow(/^agentCliSessions: "maxRunningSessions" must be a positive integer up to 10,000/);
  });

  it("a new start_session that ends a session's own live process takes that process's slot (maxRunningSessions 1)", async () => {
    const adapter = fakeAdapter({
      interactive: true,
      script: (run) => [...created(`task-${run.start.type === 'new_task' ? run.start.prompt : ''}`), ...done(10), { hang: true }],
    });
    const engine = createEngine({ epics: [agentCliSessions({ clis: { acp: fakeSpec(adapter, { killGraceMs: 200 }) }, defaultCli: 'acp', maxRunningSessions: 1 })] });
    engines.push(engine);
    await engine.spawn('s1', 'agent-manager-session');
    await engine.dispatch('s1', { type: 'start_session', prompt: 'a' });
    await until(engine, 's1', (s) => s.value === 'completed'); // its process lives on
    await engine.dispatch('s1', { type: 'start_session', prompt: 'b' });
    expect(await until(engine, 's1', (s) => s.value === 'completed' || s.value === 'error')).toMatchObject({ value: 'completed', sessionId: 'task-b' });
    expect(adapter.runs).toHaveLength(2);
  });

  it('after a restart a session whose process died with the server gets process_lost -> paused, and resume_session starts a new run', async () => {
    const adapter = fakeAdapter({
      interactive: false,
      script: (run) => (run.start.type === 'new_task' ? [...created('task-9', 700), { hang: true }] : [event({ type: 'say:text', text: 'resumed', ts: 701 }), ...done(702)]),
    });
    // A CLI that says nothing: its session is driven by hand below.
    const quiet = fakeSpec(fakeAdapter({ interactive: false, script: () => [{ hang: true }] }), { killGraceMs: 200 });
    const first = open({ fake: fakeSpec(adapter, { killGraceMs: 200 }), quiet });
    await first.engine.spawn('s1', 'agent-manager-session', { autoApprove: true });
    await first.engine.dispatch('s1', { type: 'start_session', prompt: 'long task' });
    await until(first.engine, 's1', (s) => s.value === 'streaming');
    // A one-shot CLI's session waiting for input has no process to lose: it stays as it is.
    await first.engine.spawn('s2', 'agent-manager-session', { autoApprove: true, cli: 'quiet' });
    await first.engine.dispatch('s2', { type: 'start_session', prompt: 'ask me' });
    await first.engine.dispatch('s2', { type: 'session_created', sessionId: 'x' });
    await first.engine.dispatch('s2', { type: 'api_req_started' });
    await first.engine.dispatch('s2', { type: 'ask:followup', text: 'which?' });
    await first.engine.close(); // the server stops: its processes end with it
    engines.splice(engines.indexOf(first.engine), 1);

    const second = open({ fake: fakeSpec(adapter), quiet }, { file: first.file });
    expect(await until(second.engine, 's1', (s) => s.value === 'paused')).toMatchObject({ value: 'paused', error: PROCESS_LOST_REASON });
    await second.engine.dispatch('s1', { type: 'resume_session' });
    expect((await until(second.engine, 's1', (s) => s.value === 'completed')).lastText).toBe('done');
    expect(adapter.runs.map((run) => run.start.type)).toEqual(['new_task', 'resume']);
    expect(adapter.runs[1]).toMatchObject({ sessionId: 'task-9', afterTs: 700 });
    expect(path(second.runes, 's2')).toEqual([]);
    expect((await until(second.engine, 's2', () => true)).value).toBe('waiting_input');
  });

  it('spawnProcess replaces the OS process: it is told the options and whom the process is for, and the session runs as with a real one', async () => {
    const told: [CliProcessOptions, CliSpawnContext][] = [];
    // The fake's steps, run in this process: the adapter launches them as it would the real fake.
    const adapter = fakeAdapter({ interactive: false, script: () => [...created(), { line: 'not json' }, ...done(1002), { stderr: 'bye' }, { exit: 0 }] });
    const spawnProcess: SpawnCliProcess = (options, context) => {
      told.push([options, context]);
      return inProcessCli(options, stepsProgram(JSON.parse(options.args!.at(-1)!) as FakeStep[]));
    };
    const { engine, runes, errors } = open({ fake: { adapter, command: 'no-such-command', cwd: '/nowhere', idleTimeoutMs: 5000 } }, { spawnProcess });
    await engine.spawn('s1', 'agent-manager-session', { autoApprove: true });
    await engine.dispatch('s1', { type: 'start_session', prompt: 'build it' });
    expect(await until(engine, 's1', (s) => s.exitCode !== undefined)).toMatchObject({ value: 'completed', sessionId: 'task-1', exitCode: 0 });
    expect(path(runes).slice(1)).toEqual([
      'start_session->creating',
      'session_created->creating',
      'api_req_started->streaming',
      'say:completion_result->streaming',
      'ask:completion_result->completed',
      'process_exit->completed',
    ]);
    expect(errors).toContainEqual({ type: 'output_ignored', epic: 'agentCliSessions', stream: 's1', reason: 'not JSON: not json' });
    expect(told).toHaveLength(1);
    const [options, context] = told[0]!;
    expect(options).toMatchObject({ command: 'no-such-command', cwd: '/nowhere', idleTimeoutMs: 5000 });
    expect(options.scheduler).toBeDefined();
    expect(context).toEqual({ stream: 's1', cli: 'fake', run: { start: { type: 'new_task', prompt: 'build it' }, autoApprove: true, cwd: '/nowhere' } });
  });

  it('a spawnProcess that throws is a run that could not start: process_error, and the epic carries on', async () => {
    const adapter = fakeAdapter({ interactive: false, script: () => [] });
    const spawnProcess: SpawnCliProcess = () => {
      throw new Error('no fake for this CLI');
    };
    const { engine } = open({ fake: fakeSpec(adapter) }, { spawnProcess });
    for (const stream of ['s1', 's2']) {
      await engine.spawn(stream, 'agent-manager-session', { autoApprove: true });
      await engine.dispatch(stream, { type: 'start_session', prompt: 'go' });
      expect((await until(engine, stream, (s) => s.value === 'error')).error).toBe('drive_failed: no fake for this CLI');
    }
    expect(() => agentCliSessions({ clis: {}, spawnProcess: 'cline' as unknown as SpawnCliProcess })).toThrow(/^agentCliSessions: "spawnProcess" must be a function/);
  });

  it('an adapter that cannot launch a run (a follow-up it has no session id for) gives process_error drive_failed: the session does not wait in streaming', async () => {
    const steps = fakeAdapter({ interactive: false, script: () => [...created(), ...done(1001)] });
    const adapter: AgentCliAdapter = {
      ...steps,
      launch: (run) => {
        if (run.start.type === 'follow_up') throw new Error('a follow-up needs the task id');
        return steps.launch(run);
      },
    };
    const spawnProcess: SpawnCliProcess = (options) => inProcessCli(options, stepsProgram(JSON.parse(options.args!.at(-1)!) as FakeStep[]));
    const { engine } = open({ fake: fakeSpec(adapter) }, { spawnProcess });
    await engine.spawn('s1', 'agent-manager-session', { autoApprove: true });
    await engine.dispatch('s1', { type: 'start_session', prompt: 'go' });
    await until(engine, 's1', (s) => s.value === 'completed');
    await engine.dispatch('s1', { type: 'send_message', text: 'more' });
    const failed = firstValueFrom(engine.errors$.pipe(filter((error) => error.type === 'effect_failed')));
    const outcome = await Promise.race([until(engine, 's1', (s) => s.value === 'error').then((s) => s.error), failed.then((error) => `${error.type}`)]);
    expect(outcome).toBe('drive_failed: the "fake" adapter failed: a follow-up needs the task id');
    expect(steps.runs.map((run) => run.start.type)).toEqual(['new_task']);
  });
});
