import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { EMPTY, from, lastValueFrom, NEVER, type Observable, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import type { CliOutput, CliRun, CliRunStart } from '../../../src/effects/cli/cli-adapter.js';
import { NDJSON_RESUME_TEXT, ndjsonCliAdapter } from '../../../src/effects/cli/ndjson-adapter.js';
import { agentManagerSession, type AgentManagerSessionEvent, type AgentManagerSessionState } from '../../../src/index.js';
import { splitLines } from '../../../src/streams/split-lines.js';

const fixture = (name: string): string => readFileSync(new URL(`../../fixtures/cli/cline-2.18.0/${name}.ndjson`, import.meta.url), 'utf8');

const newTask: CliRunStart = { type: 'new_task', prompt: 'Write hello.txt' };
const run = (start: CliRunStart = newTask, extra: Partial<CliRun> = {}): CliRun => ({ start, autoApprove: true, cwd: '/tmp', ...extra });

/** The adapter's outputs for stdout arriving in `chunks`. */
function drive(chunks: readonly (string | Uint8Array)[], cliRun: CliRun): Promise<CliOutput[]> {
  const lines$: Observable<string> = from(chunks).pipe(splitLines());
  return lastValueFrom(ndjsonCliAdapter.drive({ lines$, write: () => {}, end: () => {} }, cliRun, NEVER).pipe(toArray()));
}
const eventsOf = (outputs: readonly CliOutput[]): AgentManagerSessionEvent[] => outputs.flatMap((output) => ('event' in output ? [output.event] : []));
const ignoredOf = (outputs: readonly CliOutput[]): string[] => outputs.flatMap((output) => ('ignored' in output ? [output.ignored] : []));
/** What the session epic passes as `afterTs`: the largest `ts` of the events the log holds. */
const lastTs = (events: readonly AgentManagerSessionEvent[]): number => Math.max(...events.map((event) => ('ts' in event && event.ts !== undefined ? event.ts : 0)));

/** Folds events into the session, each of which the machine must accept; returns the state names passed through. */
function fold(state: AgentManagerSessionState, events: readonly AgentManagerSessionEvent[]): { state: AgentManagerSessionState; path: string[] } {
  const path: string[] = [];
  for (const event of events) {
    const step = agentManagerSession.step(state, event);
    expect(step, `${state.value} + ${JSON.stringify(event).slice(0, 120)}`).toMatchObject({ accepted: true });
    state = step.state;
    if (path.at(-1) !== state.value) path.push(state.value);
  }
  return { state, path };
}
const started = (): AgentManagerSessionState =>
  agentManagerSession.transition(agentManagerSession.initial({ autoApprove: true }), { type: 'start_session', prompt: 'Write hello.txt' });

describe('ndjsonCliAdapter.launch', () => {
  it('starts a task with --json, -y in auto-approve mode, and the prompt as an argument after --', () => {
    expect(ndjsonCliAdapter.launch(run({ type: 'new_task', prompt: '-v is a flag' }))).toEqual({ args: ['--json', '-y', '--', '-v is a flag'], endStdin: true });
    expect(ndjsonCliAdapter.launch(run(newTask, { autoApprove: false })).args).toEqual(['--json', '--', 'Write hello.txt']);
  });

  it('continues the task with -T <sessionId>: the follow-up text, or the resume text', () => {
    expect(ndjsonCliAdapter.launch(run({ type: 'follow_up', text: 'Howdy' }, { sessionId: '17' })).args).toEqual(['--json', '-y', '-T', '17', '--', 'Howdy']);
    expect(ndjsonCliAdapter.launch(run({ type: 'resume' }, { sessionId: '17' })).args).toEqual(['--json', '-y', '-T', '17', '--', NDJSON_RESUME_TEXT]);
    expect(() => ndjsonCliAdapter.launch(run({ type: 'resume' }))).toThrow(/needs the task's id/);
  });
});

describe('ndjsonCliAdapter.drive on recorded cline 2.18.0 transcripts', () => {
  it('a task that writes a file: task_started is session_created, and the session goes creating -> streaming -> completed', async () => {
    const outputs = await drive([fixture('write-file')], run());
    const events = eventsOf(outputs);
    expect(events[0]).toEqual({ type: 'session_created', sessionId: expect.stringMatching(/^\d+$/) });
    expect(events.map((event) => event.type)).toEqual(['session_created', 'api_req_started', 'api_req_started', 'say:completion_result']);
    expect(events[3]).toMatchObject({ text: 'I wrote hello.txt.', ts: expect.any(Number) });
    // api_req_started keeps its ts but not the whole request as its text.
    expect(events[1]).toEqual({ type: 'api_req_started', ts: expect.any(Number) });
    expect(ignoredOf(outputs)).toEqual(['say:task has no agentManagerSession event', 'say:tool has no agentManagerSession event']);
    const { state, path } = fold(started(), [...events, { type: 'process_exit', code: 0 }]);
    expect(path).toEqual(['creating', 'streaming', 'completed']);
    expect(state).toMatchObject({ value: 'completed', sessionId: (events[0] as { sessionId: string }).sessionId, lastText: 'I wrote hello.txt.', exitCode: 0 });
  });

  it('a follow-up (-T): the re-printed history is skipped by afterTs, task_started and the resume ask are ignored, and the session completes again', async () => {
    const first = eventsOf(await drive([fixture('write-file')], run()));
    const sessionId = (first[0] as { sessionId: string }).sessionId;
    const afterTs = lastTs(first);
    const outputs = await drive([fixture('write-file-followup')], run({ type: 'follow_up', text: 'Now write greeting.txt' }, { sessionId, afterTs }));
    const ignored = ignoredOf(outputs);
    expect(ignored[0]).toBe('task_started of a -T run (the same task): the session was created by its first run');
    expect(ignored.filter((reason) => reason.startsWith('history:'))).toHaveLength(5);
    expect(ignored).toContain("ask:resume_task: answered by the follow-up's text on the command line");
    const events = eventsOf(outputs);
    expect(events.map((event) => event.type)).toEqual(['api_req_started', 'api_req_started', 'say:completion_result']);
    expect(events.every((event) => 'ts' in event && event.ts! > afterTs)).toBe(true);

    const done = fold(started(), [...first, { type: 'process_exit', code: 0 }]).state;
    const { state, path } = fold(done, [{ type: 'send_message', text: 'Now write greeting.txt' }, ...events, { type: 'process_exit', code: 0 }]);
    expect(path).toEqual(['streaming', 'completed']);
    expect(state.lastText).toBe('I wrote greeting.txt.');
  });

  it('a question asked without -y (--auto-approve-all) waits in waiting_input; its answer (-T) continues to completed', async () => {
    const outputs = await drive([fixture('question-1-ask')], run());
    const first = eventsOf(outputs);
    const asked = fold(started(), first);
    expect(asked.path).toEqual(['creating', 'streaming', 'waiting_input']);
    expect(asked.state.lastAsk).toBe('followup');
    // Ended with SIGTERM (nothing can answer it on stdin): what cline prints while it shuts down is ignored.
    expect(ignoredOf(outputs).slice(-3)).toEqual([
      'not JSON: cline is shutting down on SIGTERM: "SIGTERM received, shutting down..."',
      'ask:resume_task after SIGTERM: cline marks the task interrupted for a later -T, the process is ending',
      'ask:resume_task after SIGTERM: cline marks the task interrupted for a later -T, the process is ending',
    ]);
    // A clean exit with the question pending is recorded: the session keeps waiting for the answer.
    expect(agentManagerSession.transition(asked.state, { type: 'process_exit', code: 0 })).toMatchObject({ value: 'waiting_input', exitCode: 0 });

    const sessionId = (first[0] as { sessionId: string }).sessionId;
    const answer = eventsOf(await drive([fixture('question-2-answer')], run({ type: 'follow_up', text: 'Howdy' }, { sessionId, afterTs: lastTs(first) })));
    const { state, path } = fold(asked.state, [{ type: 'send_message', text: 'Howdy' }, ...answer, { type: 'process_exit', code: 0 }]);
    expect(path).toEqual(['streaming', 'completed']);
    expect(state.lastText).toBe('I wrote greeting.txt.');
  });

  it('in -y mode cline answers a question itself: the task runs to completion with no waiting_input', async () => {
    const outputs = await drive([fixture('question-yolo')], run());
    expect(ignoredOf(outputs)).toContain('say:info has no agentManagerSession event');
    expect(fold(started(), [...eventsOf(outputs), { type: 'process_exit', code: 0 }]).path).toEqual(['creating', 'streaming', 'completed']);
  });

  it('a model server failing with 500: ask:api_req_failed is error, the error line after it is ignored, exit 1 stays error', async () => {
    const outputs = await drive([fixture('api-failure')], run());
    const events = eventsOf(outputs);
    expect(events.at(-1)).toMatchObject({ type: 'ask:api_req_failed', text: expect.stringContaining('500 scripted failure 500') });
    expect(ignoredOf(outputs).at(-1)).toMatch(/^cline's error line after its error ask, which the session has: /);
    const { state, path } = fold(started(), [...events, { type: 'process_exit', code: 1 }]);
    expect(path).toEqual(['creating', 'streaming', 'error']);
    expect(state).toMatchObject({ exitCode: 1, error: expect.stringContaining('scripted failure 500') });
  });

  it("cline's error line without an error ask before it is process_error", async () => {
    const outputs = await drive(['{"type":"task_started","taskId":"9"}\n{"type":"error","message":"Timeout"}\n'], run());
    expect(eventsOf(outputs)).toEqual([
      { type: 'session_created', sessionId: '9' },
      { type: 'process_error', error: 'Timeout' },
    ]);
    expect(fold(started(), eventsOf(outputs)).state).toMatchObject({ value: 'error', error: 'Timeout' });
  });

  it('SIGTERM mid-run: cancel_session stops the session, the shutdown output is ignored; a resume run completes it', async () => {
    const text = fixture('sigterm');
    const cut = text.indexOf('\u001b[33mSIGTERM');
    const before = eventsOf(await drive([text.slice(0, cut)], run()));
    const after = await drive([text], run());
    expect(eventsOf(after)).toEqual(before);
    const stopped = fold(started(), [...before, { type: 'cancel_session' }]).state;
    expect(stopped.value).toBe('stopped');

    const sessionId = (before[0] as { sessionId: string }).sessionId;
    const resumed = await drive([fixture('sigterm-resume')], run({ type: 'resume' }, { sessionId, afterTs: lastTs(before) }));
    expect(ignoredOf(resumed)).toContain('ask:resume_task: answered by the resume text on the command line');
    const { path } = fold(stopped, [{ type: 'resume_session' }, ...eventsOf(resumed), { type: 'process_exit', code: 0 }]);
    expect(path).toEqual(['streaming', 'completed']);
  });
});

describe('ndjsonCliAdapter.drive on broken and split input', () => {
  it('gives the same outputs for a transcript split anywhere, inside UTF-8 characters too', async () => {
    const bytes = new TextEncoder().encode(`${fixture('write-file-followup')}{"ts":1,"type":"say","say":"text","text":"ünïcødé ✓"}\n`);
    const whole = await drive([bytes], run());
    expect(eventsOf(whole).at(-1)).toMatchObject({ type: 'say:text', text: 'ünïcødé ✓' });
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 40 }), async (cuts) => {
        const ends = [...cuts.sort((a, b) => a - b), bytes.length];
        const chunks = ends.map((end, index) => bytes.slice(index === 0 ? 0 : ends[index - 1], end));
        expect(await drive(chunks, run())).toEqual(whole);
      }),
      { numRuns: 50 },
    );
  });

  it('ignores garbage with the reason, and carries on', async () => {
    const outputs = await drive(
      ['not json at all\n[1,2]\n{"type":"task_started"}\n{"type":"say"}\n{"type":"task_started","taskId":"5"}\n{"type":"task_started","taskId":"6"}\n'],
      run(),
    );
    expect(outputs).toEqual([
      { ignored: 'not JSON: "not json at all"' },
      { ignored: 'not a CLI message: expected an object, got an array' },
      { ignored: 'task_started without a task id (1 to 256 characters): "undefined"' },
      { ignored: 'invalid CLI message: say: required when type is "say"' },
      { event: { type: 'session_created', sessionId: '5' } },
      { ignored: 'task_started again ("6"): the session is created already' },
    ]);
  });

  it('quotes at most 200 characters of a long garbage line', async () => {
    const [output] = await drive([`${'x'.repeat(5000)}\n`], run());
    expect((output as { ignored: string }).ignored).toBe(`not JSON: "${'x'.repeat(200)}..."`);
  });

  it('completes when stdout ends, without output for an empty one', async () => {
    expect(await lastValueFrom(ndjsonCliAdapter.drive({ lines$: EMPTY, write: () => {}, end: () => {} }, run(), NEVER).pipe(toArray()))).toEqual([]);
  });
});
