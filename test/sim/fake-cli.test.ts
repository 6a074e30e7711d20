import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VirtualTimeScheduler } from 'rxjs';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { createFakeCli, drawTurn, type FakeCliName, type FakeCliOptions, type FakeTurn, type FakeTurnEnd } from '../../sim/fake-cli.js';
import { agentCliSessions, type CliProcessIo } from '../../src/agents.js';
import { createEngine, type AgentManagerSessionEvent, type Engine, type Rune } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { seededRandom } from '../support/seeded-random.js';
import { quiet, runVirtualTimeUntil, stepVirtualTime } from '../support/virtual-time.js';
import { until } from '../effects/cli/support.js';

// No real process may start here: every spawn of the module graph is refused and remembered.
const realSpawns = vi.hoisted(() => [] as unknown[]);
vi.mock('node:child_process', async (importOriginal) => ({
  ...(await importOriginal<typeof import('node:child_process')>()),
  spawn: (...args: unknown[]) => {
    realSpawns.push(args);
    throw new Error('a real process was spawned');
  },
}));

/** Agent CLI sessions through the engine on a real SQLite file, under virtual time, each run a fake CLI in this process. */

const dir = mkdtempSync(join(tmpdir(), 'runestream-fake-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
  if (realSpawns.length > 0) throw new Error(`a test spawned ${realSpawns.length} real processes: ${JSON.stringify(realSpawns.splice(0))}`);
});

let files = 0;
/** A world: a virtual clock, the fake CLIs and an engine running their sessions on a new SQLite file. */
function world(options: Partial<FakeCliOptions> & { seed?: number } = {}) {
  const { seed = 1, ...fakeOptions } = options;
  const scheduler = new VirtualTimeScheduler();
  const fake = createFakeCli({ random: seededRandom(seed), scheduler, ...fakeOptions });
  const file = join(dir, `fake-cli-${++files}.db`);
  const runes: Rune[] = [];
  const open = (): Engine => {
    const opened = createEngine({ store: sqliteStore(file), scheduler, epics: [agentCliSessions({ clis: fake.clis, spawnProcess: fake.spawnProcess })] });
    engines.push(opened);
    opened.runes$().subscribe((rune) => runes.push(rune));
    return opened;
  };
  let engine = open();
  const of = (stream: string) => runes.filter((rune) => rune.stream === stream);
  const value = (stream: string) => of(stream).at(-1)?.to;
  return {
    scheduler,
    fake,
    get engine() {
      return engine;
    },
    /** The server stops and another starts on the same SQLite file, the same fakes and clock: nothing of the first is left in memory. */
    restart: async () => {
      await engine.close();
      engines.splice(engines.indexOf(engine), 1);
      engine = open();
    },
    runes,
    of,
    value,
    /** Runs virtual time until `done()` holds; false when nothing more was scheduled first. */
    run: (done: () => boolean) => runVirtualTimeUntil(scheduler, () => runes.length, done),
    quiet: () => quiet(() => runes.length),
    /** Spawns a session of `cli` and starts it. */
    start: async (stream: string, cli: FakeCliName, input: { autoApprove?: boolean } = {}) => {
      await engine.spawn(stream, 'agent-manager-session', { cli, ...input });
      await engine.dispatch(stream, { type: 'start_session', prompt: `task of ${stream}` });
    },
  };
}

/** The same turn for every prompt. */
const always = (turn: FakeTurn) => () => turn;
const said = (runes: readonly Rune[]) =>
  runes.filter((r) => r.kind === 'say:text' && (r.event as { partial?: boolean }).partial !== true).map((r) => (r.event as { text?: string }).text);

describe('createFakeCli: sessions end to end with no real process', () => {
  it('an NDJSON (cline --json) session runs from start_session to completed: streamed text, then exit 0', async () => {
    const w = world({
      turn: always({
        messages: [
          ['Reading', 'the tests'],
          ['All', 'green', 'now'],
        ],
        end: { type: 'complete' },
      }),
    });
    await w.start('s1', 'fake-ndjson', { autoApprove: true });
    expect(await w.run(() => w.value('s1') === 'completed' && w.fake.alive() === 0)).toBe(true);
    const kinds = w.of('s1').map((r) => `${r.kind}->${r.to}`);
    expect(kinds.slice(0, 5)).toEqual(['spawned->idle', 'start_session->creating', 'session_created->creating', 'api_req_started->streaming', 'say:text->streaming']);
    // cline -y exits after its completion_result; in other modes it asks ask:completion_result, and the session, completed, ends it.
    expect(kinds.at(-1)).toMatch(/^(process_exit|ask:completion_result)->completed$/);
    expect(said(w.of('s1'))).toEqual(['Reading the tests', 'All green now']);
    expect(w.of('s1').filter((r) => r.kind === 'say:text').length).toBeGreaterThan(2); // partial chunks came first
    expect(w.fake.stats()).toMatchObject({ spawned: 1, spawnFailed: 0, alive: 0, protocolErrors: [] });
    expect(w.fake.stats().runs).toEqual([
      {
        pid: 1,
        cli: 'fake-ndjson',
        stream: 's1',
        start: 'new_task',
        ...(kinds.at(-1)!.startsWith('process_exit') ? { ended: 'exited', exitCode: 0, did: ['turn:complete', 'exit:0'] } : { ended: 'killed', did: ['turn:complete'] }),
      },
    ]);
  });

  it('an ACP session asks for approval; approve_action reaches the fake, which goes on to completion and lives on for the next prompt', async () => {
    const turns: FakeTurn[] = [
      { messages: [['Let me', 'edit it'], ['Edited.']], ask: { kind: 'tool', title: 'edit src/a.ts' }, end: { type: 'complete' } },
      { messages: [['You', 'are welcome.']], end: { type: 'complete' } },
    ];
    const w = world({ turn: ({ index }) => turns[Math.min(index, 1)]! });
    await w.start('s1', 'fake-acp');
    expect(await w.run(() => w.value('s1') === 'waiting_approval')).toBe(true);
    const asked = w.of('s1').find((r) => r.kind === 'ask:tool' && r.to === 'waiting_approval')!;
    expect(JSON.parse((asked.event as unknown as { text: string }).text)).toEqual({
      tool: 'edit src/a.ts',
      kind: 'edit',
      input: { path: 'src/a.ts', content: 'fake content' },
    });
    expect(w.fake.stats().runs[0]!.did).toEqual(['turn:complete', 'ask:tool']);

    await w.engine.dispatch('s1', { type: 'approve_action' });
    expect(await w.run(() => w.value('s1') === 'completed')).toBe(true);
    expect(w.fake.stats().runs[0]!.did).toEqual(['turn:complete', 'ask:tool', 'approved']);
    expect(w.of('s1').at(-1)!.event).toEqual({ type: 'ask:completion_result', partial: false, text: 'Let me edit it\n\nEdited.' });
    expect(w.fake.alive()).toBe(1); // an ACP agent's process lives across turns

    await w.engine.dispatch('s1', { type: 'send_message', text: 'thanks' });
    expect(await w.run(() => w.value('s1') === 'completed' && w.fake.stats().runs[0]!.did.length === 4)).toBe(true);
    expect(said(w.of('s1')).at(-1)).toBe('You are welcome.');
    expect(w.fake.stats().runs).toHaveLength(1);
    await w.engine.close();
    expect(w.fake.stats()).toMatchObject({
      spawned: 1,
      alive: 0,
      protocolErrors: [],
      runs: [{ ended: 'killed', did: ['turn:complete', 'ask:tool', 'approved', 'turn:complete'] }],
    });
  });

  it('an ACP session whose command is rejected: the fake fails the tool call and ends its turn with no more text', async () => {
    const w = world({ turn: always({ messages: [['Running', 'it'], ['Never said.']], ask: { kind: 'command', title: 'npm test' }, end: { type: 'complete' } }) });
    await w.start('s1', 'fake-acp');
    expect(await w.run(() => w.value('s1') === 'waiting_approval')).toBe(true);
    expect(w.of('s1').at(-1)!.event).toMatchObject({ type: 'ask:command', text: 'npm test' });
    await w.engine.dispatch('s1', { type: 'reject_action' });
    expect(await w.run(() => w.value('s1') === 'completed')).toBe(true);
    expect(said(w.of('s1'))).toEqual(['Running it']);
    expect(w.fake.stats()).toMatchObject({ protocolErrors: [], runs: [{ did: ['turn:complete', 'ask:command', 'rejected'] }] });
  });

  for (const cli of ['fake-ndjson', 'fake-acp'] as const) {
    it(`${cli}: cancel_session while it streams kills the run (alive back to 0), and nothing more of it is dispatched`, async () => {
      const chunks = Array.from({ length: 20 }, (_, i) => `part${i}`);
      const w = world({ turn: always({ messages: [chunks], end: { type: 'complete' } }) });
      await w.start('s1', cli, { autoApprove: true });
      expect(await w.run(() => w.of('s1').filter((r) => r.kind === 'say:text').length >= 3)).toBe(true);
      expect(w.fake.alive()).toBe(1);
      await w.engine.dispatch('s1', { type: 'cancel_session' });
      await w.quiet();
      expect(w.fake.alive()).toBe(0);
      const did = w.fake.stats().runs[0]!.did.slice();
      const afterCancel = w.of('s1').length;
      while (stepVirtualTime(w.scheduler)) await w.quiet(); // everything it had scheduled comes due
      expect(w.of('s1').at(-1)!.kind).toBe('cancel_session');
      expect(w.of('s1')).toHaveLength(afterCancel);
      expect(w.value('s1')).toBe('stopped');
      expect(w.fake.stats()).toMatchObject({ spawned: 1, alive: 0, protocolErrors: [], runs: [{ ended: 'killed', did }] });
    });
  }

  it('a fake that falls silent hits the idle timeout: process_error idle_timeout, idleTimeoutMs after its last line', async () => {
    const w = world({ idleTimeoutMs: 60_000, turn: always({ messages: [['Thinking']], end: { type: 'hang' } }) });
    await w.start('s1', 'fake-ndjson', { autoApprove: true });
    expect(await w.run(() => w.value('s1') === 'error')).toBe(true);
    const error = w.of('s1').at(-1)!;
    expect((error.event as unknown as { error: string }).error).toBe('idle_timeout: "fake-ndjson" printed no line for 60000 ms, so it was ended');
    const lastLine = w
      .of('s1')
      .filter((r) => r.kind === 'say:text')
      .at(-1)!;
    expect(error.at - lastLine.at).toBe(60_000);
    expect(w.fake.stats()).toMatchObject({ alive: 0, runs: [{ ended: 'idle_timeout', did: ['turn:hang'] }] });
  });

  it('a drawn spawn failure is a run that never started: process_error spawn_failed', async () => {
    const w = world({ turn: always({ messages: [], end: { type: 'spawn_failed' } }) });
    await w.start('s1', 'fake-acp');
    expect(await w.run(() => w.value('s1') === 'error')).toBe(true);
    expect((w.of('s1').at(-1)!.event as unknown as { error: string }).error).toMatch(/^spawn_failed: could not start "fake-acp" in .*: ENOENT/);
    expect(w.fake.stats()).toMatchObject({ spawned: 0, spawnFailed: 1, alive: 0, runs: [{ ended: 'spawn_failed', did: [] }] });
  });

  it("a retry after a spawn failure creates the CLI's task in streaming, so a follow-up after a restart continues it (-T <taskId>)", async () => {
    let firstRuns = 0;
    const w = world({
      // The first process fails to start; every other run completes, after an auto-approved edit.
      turn: ({ index }) =>
        index === 0 && ++firstRuns === 1
          ? { messages: [], end: { type: 'spawn_failed' } }
          : { messages: [['tests']], ask: { kind: 'tool', title: 'edit README.md' }, end: { type: 'complete' } },
    });
    await w.start('s1', 'fake-ndjson', { autoApprove: true });
    expect(await w.run(() => w.value('s1') === 'error')).toBe(true);
    await w.engine.dispatch('s1', { type: 'retry' });
    expect(await w.run(() => w.value('s1') === 'completed' && w.fake.alive() === 0)).toBe(true);
    await w.restart();

    await w.engine.dispatch('s1', { type: 'send_message', text: 'one more thing' });
    await w.run(() => w.fake.alive() === 0 && w.value('s1') !== 'streaming');
    const state = await until(w.engine, 's1', () => true);
    expect({ value: state.value, sessionId: state.sessionId, lastText: state.lastText }).toEqual({ value: 'completed', sessionId: 'fake-task-1', lastText: 'tests' });
    const { runs, protocolErrors } = w.fake.stats();
    expect([runs.map((run) => run.start), runs[0]!.ended, protocolErrors]).toEqual([['new_task', 'new_task', 'follow_up'], 'spawn_failed', []]);
    // The follow-up continued cline's task (-T): the history it printed again was skipped, so only its own turn is in the log.
    const followUp = w.of('s1').slice(w.of('s1').findIndex((r) => r.kind === 'send_message'));
    expect(followUp.map((r) => r.kind).filter((kind) => kind !== 'say:text')).toEqual([
      'send_message',
      'api_req_started',
      'ask:tool', // partial
      'ask:tool',
      'api_req_started',
      'say:completion_result',
      expect.stringMatching(/^(process_exit|ask:completion_result)$/),
    ]);
  });

  it('fake-acp speaks JSON-RPC: session/cancel ends the turn (cancelled, nothing more of it); an unknown method is answered -32601 and told', () => {
    const scheduler = new VirtualTimeScheduler();
    const fake = createFakeCli({ random: seededRandom(5), scheduler, turn: always({ messages: [['a', 'b', 'c', 'd', 'e', 'f']], end: { type: 'complete' } }) });
    const got: { id?: number; method?: string; result?: { sessionId?: string; stopReason?: string }; error?: { code: number } }[] = [];
    let io: CliProcessIo | undefined;
    const run = { start: { type: 'new_task', prompt: 'go' }, autoApprove: false, cwd: '/' } as const;
    fake.spawnProcess({ command: 'fake-acp', cwd: '/', scheduler }, { stream: 's1', cli: 'fake-acp', run }).subscribe((e) => {
      if (e.type !== 'spawned') return;
      io = e.io;
      e.io.lines$.subscribe((line) => got.push(JSON.parse(line) as (typeof got)[number]));
    });
    /** Lets a second of virtual time pass: the fake answers within it (maxDelayMs, 1,000). */
    const aSecond = () => {
      scheduler.maxFrames = scheduler.now() + 1000;
      scheduler.flush();
    };
    const send = (message: object) => {
      io!.write(JSON.stringify({ jsonrpc: '2.0', ...message }));
      aSecond();
    };
    send({ id: 0, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {} } });
    send({ id: 1, method: 'session/new', params: { cwd: '/', mcpServers: [] } });
    const sessionId = got.at(-1)!.result!.sessionId!;
    io!.write(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'session/prompt', params: { sessionId, prompt: [{ type: 'text', text: 'go' }] } }));
    // It streams: two of its six chunks, then the client cancels.
    const updates = () => got.filter((m) => m.method === 'session/update').length;
    while (updates() < 2 && stepVirtualTime(scheduler));
    send({ method: 'session/cancel', params: { sessionId } });
    aSecond(); // and nothing more of the turn comes
    expect([updates(), got.at(-1)]).toEqual([2, { jsonrpc: '2.0', id: 2, result: { stopReason: 'cancelled' } }]);
    send({ id: 3, method: 'fs/read_text_file', params: {} });
    expect(got.at(-1)).toMatchObject({ id: 3, error: { code: -32601 } });
    expect(fake.stats()).toMatchObject({
      alive: 1,
      protocolErrors: ['pid 1: request fs/read_text_file: not a method the agent offers'],
      runs: [{ did: ['turn:complete', 'cancelled'] }],
    });
  });

  it('the same random sequence gives identical runes, whole; another gives others', async () => {
    const first = await story(7);
    const again = await story(7);
    const other = await story(8);
    expect(first.runes.length).toBeGreaterThan(100);
    expect(again.runes).toEqual(first.runes);
    expect(again.stats).toEqual(first.stats);
    expect(other.runes).not.toEqual(first.runes);
    for (const { stats } of [first, other]) expect([stats.alive, stats.protocolErrors, stats.runs.length > 6]).toEqual([0, [], true]);
  });
});

/**
 * Six sessions, three of each CLI, with turns and delays drawn from `seed`, and a user who answers
 * every approval, question and failure (drawn from a second generator) a few times, until nothing
 * more is scheduled; then the engine closes. Returns every rune and what the fakes did.
 */
async function story(seed: number) {
  const w = world({ seed, idleTimeoutMs: 120_000 });
  const user = seededRandom(seed + 1_000_000);
  const sessions = ['s1', 's2', 's3', 's4', 's5', 's6'];
  for (const [i, stream] of sessions.entries()) await w.start(stream, i % 2 === 0 ? 'fake-ndjson' : 'fake-acp', { autoApprove: i % 2 === 0 || i === 3 });
  const answered = new Map<string, number>();
  const budget = new Map<string, number>(sessions.map((s) => [s, 6]));
  /** What the user does about a session waiting for a person, once per state it reaches. */
  const act = async (stream: string): Promise<boolean> => {
    const last = w.of(stream).at(-1)!;
    if (answered.get(stream) === last.seq || budget.get(stream)! <= 0) return false;
    const event: AgentManagerSessionEvent | undefined = {
      waiting_approval: user() < 0.7 ? { type: 'approve_action' as const } : { type: 'reject_action' as const },
      waiting_input: { type: 'send_message' as const, text: 'go on' },
      completed: user() < 0.5 ? { type: 'send_message' as const, text: 'and one more thing' } : undefined,
      error: { type: 'retry' as const },
      paused: { type: 'resume_session' as const },
    }[last.to ?? ''];
    answered.set(stream, last.seq);
    if (event === undefined) return false;
    budget.set(stream, budget.get(stream)! - 1);
    await w.engine.dispatch(stream, event);
    return true;
  };
  for (let step = 0; step < 50_000; step++) {
    let acted = false;
    for (const stream of sessions) acted = (await act(stream)) || acted;
    if (!acted && !stepVirtualTime(w.scheduler)) break;
    await w.quiet();
  }
  await w.engine.close();
  return { runes: w.runes, stats: w.fake.stats() };
}

describe('drawTurn', () => {
  it('draws every kind of turn from random: text in chunks, asks of both kinds, and every ending (spawn_failed only first)', () => {
    const random = seededRandom(3);
    const turns = Array.from({ length: 3000 }, (_, i) => ({
      index: i % 3,
      turn: drawTurn({ random, cli: 'fake-acp', stream: 's', run: { start: { type: 'resume' }, autoApprove: false, cwd: '.' }, index: i % 3 }),
    }));
    const ends = new Set(turns.map(({ turn }) => endName(turn.end)));
    expect([...ends].sort()).toEqual(['complete', 'exit:0', 'exit:0:duringAsk', 'exit:1', 'exit:1:duringAsk', 'exit:2', 'fail', 'hang', 'question', 'spawn_failed']);
    expect(turns.every(({ index, turn }) => turn.end.type !== 'spawn_failed' || index === 0)).toBe(true);
    expect(new Set(turns.map(({ turn }) => turn.ask?.kind ?? 'none'))).toEqual(new Set(['tool', 'command', 'none']));
    const sizes = turns.flatMap(({ turn }) => [turn.messages.length, ...turn.messages.map((m) => m.length)]);
    expect([Math.min(...sizes), Math.max(...sizes)]).toEqual([1, 3]);
  });
});

const endName = (end: FakeTurnEnd): string => (end.type === 'exit' ? `exit:${end.code}${end.duringAsk ? ':duringAsk' : ''}` : end.type);
