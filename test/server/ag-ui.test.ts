import { HttpAgent, type BaseEvent, type Interrupt } from '@ag-ui/client';
import { filter, firstValueFrom, takeWhile, toArray } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, scriptedModel, type AnyTool, type ScriptEntry } from '../../src/agents.js';
import { agentStreams, createEngine, memoryStore, type TurnEngineState } from '../../src/index.js';
import { agUiRoutes } from '../../src/server/ag-ui/ag-ui-routes.js';
import { startServer } from '../support/ws-client.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

/** A tool that needs approval and records what it saved. */
function noteTool() {
  const saved: string[] = [];
  const tool = defineTool({
    name: 'save_note',
    description: 'Saves a note.',
    inputSchema: z.object({ text: z.string() }),
    needsApproval: true,
    execute: ({ text }) => {
      saved.push(text);
      return { saved: text };
    },
  });
  return { tool, saved };
}

/** A tool that needs no approval and holds each run until `release()`. */
function gatedClock() {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const tool = defineTool({
    name: 'clock',
    description: 'Tells the time.',
    inputSchema: z.object({}),
    execute: async () => {
      await released;
      return { time: '12:00' };
    },
  });
  return { tool, release };
}

/** An engine running agents on a scripted model, and a real server on 127.0.0.1 with the AG-UI route of agent "assistant". */
async function agUiServer(script: readonly ScriptEntry[], tools: AnyTool[] = [noteTool().tool]) {
  const model = scriptedModel(script);
  const engine = createEngine({ store: memoryStore(), epics: agentEpics({ model, tools }) });
  const h = await startServer({ engine, routes: agUiRoutes({ engine, agents: { assistant: {} } }) });
  stop = h.stop;
  const url = `${h.server.httpUrl}/agents/assistant/ag-ui`;
  return { ...h, url, model };
}

/** Runs `agent` once, collecting the events it applied (the client checks their order) and how it ended. */
async function run(agent: HttpAgent, parameters: Parameters<HttpAgent['runAgent']>[0] = {}, onEvent?: (event: BaseEvent) => void) {
  const events: BaseEvent[] = [];
  let error: Error | undefined;
  await agent
    .runAgent(parameters, {
      onEvent: ({ event }) => {
        events.push(event);
        onEvent?.(event);
      },
      onRunFailed: ({ error: failure }) => {
        error = failure;
      },
    })
    .catch((failure: Error) => {
      error = failure;
    });
  return { events, types: events.map((event): string => event.type), error };
}

/** A user's message added to the agent's conversation. */
const say = (agent: HttpAgent, id: string, content: string): void => agent.addMessage({ id, role: 'user', content });

const textOf = (events: readonly BaseEvent[]): string =>
  events
    .filter((event) => event.type === 'TEXT_MESSAGE_CONTENT')
    .map((event) => event.delta as string)
    .join('');

describe('AG-UI: POST /agents/:agent/ag-ui with @ag-ui/client HttpAgent', () => {
  it('a text answer: RUN_STARTED, STATE_SNAPSHOT, the text message, RUN_FINISHED success; the agent holds the answer', async () => {
    const h = await agUiServer([{ text: 'Hello there' }]);
    const agent = new HttpAgent({ url: h.url, threadId: 't1' });
    say(agent, 'u1', 'hi');
    const { types, events, error } = await run(agent);
    expect(error).toBeUndefined();
    expect(types[0]).toBe('RUN_STARTED');
    expect(types[1]).toBe('STATE_SNAPSHOT');
    expect(types.at(-1)).toBe('RUN_FINISHED');
    expect(events.at(-1)).toMatchObject({ threadId: 't1', outcome: { type: 'success' } });
    expect(types.filter((type) => type.startsWith('TEXT_MESSAGE'))).toEqual(['TEXT_MESSAGE_START', ...types.filter((t) => t === 'TEXT_MESSAGE_CONTENT'), 'TEXT_MESSAGE_END']);
    expect(textOf(events)).toBe('Hello there');
    expect(agent.messages.map((m) => [m.role, m.content])).toEqual([
      ['user', 'hi'],
      ['assistant', 'Hello there'],
    ]);
    // The state the client folded from the snapshot and the deltas is the turn's, done.
    expect(agent.state).toMatchObject({ status: 'idle', turn: 1 });
    // The turn ran in the log under the thread's conversation.
    const turn = await h.engine.snapshot<TurnEngineState>(agentStreams('conv/t1', 'assistant').turn);
    expect(turn?.state).toMatchObject({ value: 'idle', turn: 1, input: 'hi', output: 'Hello there' });
  });

  it('the next user message on the thread is the next turn: the model hears the conversation; a message while a turn runs is 409 run_in_progress', async () => {
    const clock = gatedClock();
    const h = await agUiServer([{ text: 'Hi!' }, { text: 'Checking.', toolCalls: [{ toolName: 'clock', input: {}, toolCallId: 'k1' }] }, { text: 'Noon.' }], [clock.tool]);
    const agent = new HttpAgent({ url: h.url, threadId: 'chat' });
    say(agent, 'u1', 'hello');
    expect((await run(agent)).error).toBeUndefined();
    say(agent, 'u2', 'what time is it');
    const second = run(agent);
    const turnStream = agentStreams('conv/chat', 'assistant').turn;
    await firstValueFrom(h.engine.state$<TurnEngineState>(turnStream).pipe(filter((s) => s.value === 'tool_executing')));
    const busy = await fetch(h.url, { method: 'POST', body: JSON.stringify({ threadId: 'chat', runId: 'r', messages: [{ id: 'x', role: 'user', content: 'and now?' }] }) });
    expect(busy.status).toBe(409);
    expect(await busy.json()).toMatchObject({ code: 'run_in_progress' });
    clock.release();
    const { events, error } = await second;
    expect(error).toBeUndefined();
    expect(textOf(events)).toBe('Checking.Noon.');
    expect(agent.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'tool', 'assistant']);
    const turn = await h.engine.snapshot<TurnEngineState>(turnStream);
    expect(turn?.state).toMatchObject({ turn: 2, input: 'what time is it' });
    // The second turn's first model call had the whole conversation, the first turn included.
    expect(JSON.stringify(h.model.doStreamCalls[1]?.prompt)).toMatch(/hello.*Hi!.*what time is it/);
  });

  it('a tool call with its result, then the answer, in one run', async () => {
    const clock = gatedClock();
    clock.release();
    const h = await agUiServer([{ text: 'Let me look.', toolCalls: [{ toolName: 'clock', input: {}, toolCallId: 'k1' }] }, { text: 'It is noon.' }], [clock.tool]);
    const agent = new HttpAgent({ url: h.url, threadId: 't2' });
    say(agent, 'u1', 'what time is it');
    const { types, events, error } = await run(agent);
    expect(error).toBeUndefined();
    const tools = events.filter((event) => event.type.startsWith('TOOL_CALL'));
    expect(tools.map((event) => event.type)).toEqual(['TOOL_CALL_START', 'TOOL_CALL_ARGS', 'TOOL_CALL_END', 'TOOL_CALL_RESULT']);
    expect(tools[0]).toMatchObject({ toolCallId: 'k1', toolCallName: 'clock' });
    expect(JSON.parse(tools[3]!.content as string)).toEqual({ status: 'success', output: { time: '12:00' } });
    // The first text message ends before the call starts; the answer is a second message.
    expect(types.indexOf('TEXT_MESSAGE_END')).toBeLessThan(types.indexOf('TOOL_CALL_START'));
    expect(types.filter((type) => type === 'TEXT_MESSAGE_START')).toHaveLength(2);
    expect(events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'success' } });
    const assistant = agent.messages.find((m) => m.role === 'assistant' && m.toolCalls !== undefined);
    expect(assistant).toMatchObject({ content: 'Let me look.', toolCalls: [{ id: 'k1', function: { name: 'clock', arguments: '{}' } }] });
    expect(agent.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'It is noon.' });
  });

  it('a failed turn ends with RUN_ERROR naming the error, its streamed text closed first', async () => {
    const h = await agUiServer([{ text: ['Hal', 'f'], error: 'the model went away', afterDeltas: 1 }]);
    const agent = new HttpAgent({ url: h.url, threadId: 'fails' });
    say(agent, 'u1', 'hi');
    const { types, events } = await run(agent);
    // The client applies RUN_ERROR as the run's end (the run itself does not reject).
    expect(types.slice(-4)).toEqual(['TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END', 'STATE_DELTA', 'RUN_ERROR']); // one state delta: the turn idle again, its error set
    expect(events.at(-1)).toMatchObject({ type: 'RUN_ERROR', code: 'turn_error' });
    expect(events.at(-1)!.message).toContain('the model went away');
    expect(textOf(events)).toBe('Hal');
    expect(agent.state).toMatchObject({ status: 'idle', error: expect.stringContaining('the model went away') });
  });

  it('a turn interrupted by a command (not by the client) ends the run cancelled', async () => {
    const clock = gatedClock();
    const h = await agUiServer([{ text: 'Checking.', toolCalls: [{ toolName: 'clock', input: {}, toolCallId: 'k1' }] }], [clock.tool]);
    const agent = new HttpAgent({ url: h.url, threadId: 'stop' });
    say(agent, 'u1', 'what time is it');
    const turnStream = agentStreams('conv/stop', 'assistant').turn;
    const ran = run(agent, {}, (event) => {
      if (event.type === 'TOOL_CALL_END') void h.engine.dispatch(turnStream, { type: 'interrupt', reason: 'user stop' });
    });
    const { events, error } = await ran;
    expect(error).toBeUndefined();
    expect(events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'cancelled' } });
    // The running call ended with a cancelled result, shown before the end.
    expect(JSON.parse(events.find((event) => event.type === 'TOOL_CALL_RESULT')!.content as string)).toMatchObject({ status: 'cancelled', reason: 'user stop' });
    expect(agent.state).toMatchObject({ status: 'idle', reason: 'user stop' });
  });

  const approvalScript: ScriptEntry[] = [
    { text: 'I will save it once you approve.', toolCalls: [{ toolName: 'save_note', input: { text: 'buy milk' }, toolCallId: 'n1' }] },
    { text: ' Done.' },
  ];

  /** Runs until the approval interrupt; returns the agent and its interrupt. */
  async function untilInterrupt(url: string, threadId: string): Promise<{ agent: HttpAgent; interrupt: Interrupt }> {
    const agent = new HttpAgent({ url, threadId });
    say(agent, 'u1', 'note: buy milk');
    const { events, error } = await run(agent);
    expect(error).toBeUndefined();
    expect(events.at(-1)).toMatchObject({
      type: 'RUN_FINISHED',
      outcome: { type: 'interrupt', interrupts: [{ id: 'approval:n1', reason: 'tool_approval', toolCallId: 'n1' }] },
    });
    expect(agent.pendingInterrupts).toHaveLength(1);
    return { agent, interrupt: agent.pendingInterrupts[0]! };
  }

  it('an approval is an interrupt; resumed with approved, the tool runs and the answer follows in that run', async () => {
    const notes = noteTool();
    const h = await agUiServer(approvalScript, [notes.tool]);
    const { agent, interrupt } = await untilInterrupt(h.url, 't3');
    expect(notes.saved).toEqual([]);

    const resumed = await run(agent, { resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }] });
    expect(resumed.error).toBeUndefined();
    expect(resumed.types[0]).toBe('RUN_STARTED');
    const result = resumed.events.find((event) => event.type === 'TOOL_CALL_RESULT');
    expect(result).toMatchObject({ toolCallId: 'n1' });
    expect(JSON.parse(result!.content as string)).toEqual({ status: 'success', output: { saved: 'buy milk' } });
    expect(textOf(resumed.events)).toBe(' Done.');
    expect(resumed.events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'success' } });
    expect(notes.saved).toEqual(['buy milk']);
    expect(agent.pendingInterrupts).toEqual([]);

    // The same answer again (a second tab): nothing is approved twice, the tool ran once.
    const again = await fetch(h.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ threadId: 't3', runId: 'r-again', messages: [], resume: [{ interruptId: 'approval:n1', status: 'resolved', payload: { approved: true } }] }),
    });
    expect(again.status).toBe(200);
    expect(await again.text()).toContain('"RUN_FINISHED"');
    expect(notes.saved).toEqual(['buy milk']);
  });

  it('resumed with {approved: false}, the call is denied: its result says so, the tool never runs, the answer follows', async () => {
    const notes = noteTool();
    const h = await agUiServer(approvalScript, [notes.tool]);
    const { agent, interrupt } = await untilInterrupt(h.url, 't4');
    const resumed = await run(agent, { resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: false } }] });
    expect(resumed.error).toBeUndefined();
    const result = resumed.events.find((event) => event.type === 'TOOL_CALL_RESULT');
    expect(JSON.parse(result!.content as string)).toMatchObject({ status: 'denied' });
    expect(resumed.events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'success' } });
    expect(notes.saved).toEqual([]);
    const call = await h.engine.snapshot<{ value: string }>(agentStreams('conv/t4', 'assistant').call('n1'));
    expect(call?.state.value).toBe('denied');
  });

  it('a resume cancelling the interrupt denies the call', async () => {
    const notes = noteTool();
    const h = await agUiServer(approvalScript, [notes.tool]);
    const { agent, interrupt } = await untilInterrupt(h.url, 't5');
    const resumed = await run(agent, { resume: [{ interruptId: interrupt.id, status: 'cancelled' }] });
    expect(resumed.error).toBeUndefined();
    expect(JSON.parse(resumed.events.find((event) => event.type === 'TOOL_CALL_RESULT')!.content as string)).toMatchObject({ status: 'denied', reason: 'cancelled' });
    expect(notes.saved).toEqual([]);
  });

  it('a client that disconnects mid-run: the turn goes on in the log; a rejoin (same thread, no new message) replays the run to its end', async () => {
    const clock = gatedClock();
    const h = await agUiServer([{ text: 'Checking.', toolCalls: [{ toolName: 'clock', input: {}, toolCallId: 'k1' }] }, { text: 'It is noon.' }], [clock.tool]);
    const agent = new HttpAgent({ url: h.url, threadId: 't6' });
    say(agent, 'u1', 'what time is it');
    const first = await run(agent, {}, (event) => {
      if (event.type === 'TOOL_CALL_END') agent.abortRun(); // the tool is still running
    });
    expect(first.types).not.toContain('RUN_FINISHED');
    const turnStream = agentStreams('conv/t6', 'assistant').turn;
    const done = firstValueFrom(h.engine.state$<TurnEngineState>(turnStream).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
    clock.release();
    expect((await done).output).toBe('Checking.It is noon.');

    const rejoined = new HttpAgent({ url: h.url, threadId: 't6' });
    const second = await run(rejoined);
    expect(second.error).toBeUndefined();
    expect(second.types[0]).toBe('RUN_STARTED');
    expect(second.events.find((event) => event.type === 'TOOL_CALL_RESULT')).toMatchObject({ toolCallId: 'k1' });
    expect(textOf(second.events)).toBe('Checking.It is noon.');
    expect(second.events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'success' } });
  });
});

describe('AG-UI: bad input', () => {
  const post = (url: string, body: unknown) =>
    fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });

  it('a malformed body is 400 naming the field; not JSON is 400 invalid_json; the server carries on', async () => {
    const h = await agUiServer([{ text: 'ok' }]);
    const noThread = await post(h.url, { runId: 'r1', messages: [] });
    expect(noThread.status).toBe(400);
    const body = (await noThread.json()) as { code: string; message: string };
    expect(body.code).toBe('invalid_message');
    expect(body.message).toContain('threadId');
    const badResume = (await (await post(h.url, { threadId: 't', runId: 'r1', messages: [], resume: [{ interruptId: 'x', status: 'maybe' }] })).json()) as { message: string };
    expect(badResume.message).toContain('resume.0.status');
    const slash = (await (await post(h.url, { threadId: 'a/b', runId: 'r1', messages: [] })).json()) as { message: string };
    expect(slash.message).toContain('threadId');
    const notJson = await post(h.url, '{');
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { code: string }).code).toBe('invalid_json');
    // Still serving.
    const agent = new HttpAgent({ url: h.url, threadId: 'ok' });
    say(agent, 'u1', 'hi');
    expect((await run(agent)).error).toBeUndefined();
  });

  it('an unknown agent is 404; a resume for an unknown interrupt is 409 naming it; a rejoin with no run is 409 no_run', async () => {
    const h = await agUiServer([{ text: 'ok' }]);
    const unknown = await post(`${h.server.httpUrl}/agents/nobody/ag-ui`, { threadId: 't', runId: 'r', messages: [] });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'unknown_agent' });
    const resume = await post(h.url, { threadId: 't', runId: 'r', messages: [], resume: [{ interruptId: 'approval:zz', status: 'resolved', payload: { approved: true } }] });
    expect(resume.status).toBe(409);
    const refused = (await resume.json()) as { code: string; message: string };
    expect(refused.code).toBe('unknown_interrupt');
    expect(refused.message).toContain('approval:zz');
    const rejoin = await post(h.url, { threadId: 'never', runId: 'r', messages: [] });
    expect(rejoin.status).toBe(409);
    expect(await rejoin.json()).toMatchObject({ code: 'no_run' });
  });

  it('a body past maxBodyBytes is 413 body_too_large, as on every route', async () => {
    const engine = createEngine({ store: memoryStore(), epics: agentEpics({ model: scriptedModel([{ text: 'ok' }]) }) });
    const h = await startServer({ engine, maxBodyBytes: 1024, routes: agUiRoutes({ engine, agents: { assistant: {} } }) });
    stop = h.stop;
    const big = await post(`${h.server.httpUrl}/agents/assistant/ag-ui`, { threadId: 't', runId: 'r', messages: [{ id: 'u', role: 'user', content: 'x'.repeat(2048) }] });
    expect(big.status).toBe(413);
    expect(await big.json()).toMatchObject({ code: 'body_too_large' });
  });

  it('an agent the caller may not drive is refused 403', async () => {
    const engine = createEngine({ store: memoryStore(), epics: agentEpics({ model: scriptedModel([{ text: 'ok' }]) }) });
    const authorize = (_request: unknown, stream: string) => !stream.startsWith('conv/secret/');
    const h = await startServer({ engine, authorize, routes: agUiRoutes({ engine, agents: { assistant: {} }, authorize }) });
    stop = h.stop;
    const refused = await fetch(`${h.server.httpUrl}/agents/assistant/ag-ui`, {
      method: 'POST',
      body: JSON.stringify({ threadId: 'secret', runId: 'r', messages: [{ id: 'u', role: 'user', content: 'hi' }] }),
    });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ code: 'forbidden' });
    expect(await engine.snapshot(agentStreams('conv/secret', 'assistant').turn)).toBeUndefined();
  });

  it("a resume is the approve action on the call: refused 403 for a caller who may drive but not approve, and nothing is answered; an approver's approval records its identity", async () => {
    const notes = noteTool();
    const script: ScriptEntry[] = [{ toolCalls: [{ toolName: 'save_note', input: { text: 'buy milk' }, toolCallId: 'n1' }] }, { text: 'Done.' }];
    const engine = createEngine({ store: memoryStore(), epics: agentEpics({ model: scriptedModel(script), tools: [notes.tool] }) });
    const verify = ({ token }: { token?: string }) => (token === 'dave' || token === 'carol' ? { id: token } : undefined);
    // dave drives; only carol approves.
    const authorize = (request: { identity: { id: string } }, _stream: string, action: string) => action !== 'approve' || request.identity.id === 'carol';
    const h = await startServer({ engine, verify, authorize, routes: agUiRoutes({ engine, agents: { assistant: {} }, authorize }) });
    stop = h.stop;
    const as = (user: string) => new HttpAgent({ url: `${h.server.httpUrl}/agents/assistant/ag-ui`, threadId: 't9', headers: { authorization: `Bearer ${user}` } });
    const dave = as('dave');
    say(dave, 'u1', 'note: buy milk');
    expect((await run(dave)).events.at(-1)).toMatchObject({ outcome: { type: 'interrupt' } });
    const resume = { interruptId: 'approval:n1', status: 'resolved' as const, payload: { approved: true } };
    const refused = await fetch(`${h.server.httpUrl}/agents/assistant/ag-ui`, {
      method: 'POST',
      headers: { authorization: 'Bearer dave', 'content-type': 'application/json' },
      body: JSON.stringify({ threadId: 't9', runId: 'r2', messages: [], resume: [resume] }),
    });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ code: 'forbidden', message: 'not allowed to approve stream "conv/t9/agent/assistant/call/n1"' });
    expect((await engine.snapshot(agentStreams('conv/t9', 'assistant').call('n1')))?.state).toMatchObject({ value: 'awaiting_approval' });

    const resumed = await run(as('carol'), { resume: [resume] });
    expect(resumed.events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'success' } });
    expect(notes.saved).toEqual(['buy milk']);
    expect((await engine.snapshot(agentStreams('conv/t9', 'assistant').call('n1')))?.state).toMatchObject({ approver: 'carol' });
    // The runes a request wrote record it as its identity's: the turn's start, the approval.
    const runes = await firstValueFrom(
      engine.runes$(agentStreams('conv/t9', 'assistant').turn).pipe(
        takeWhile((r) => r.kind !== 'turn.started', true),
        toArray(),
      ),
    );
    expect(runes.at(-1)?.origin).toMatchObject({ by: 'client' });
    const call = await firstValueFrom(
      engine.runes$(agentStreams('conv/t9', 'assistant').call('n1')).pipe(
        takeWhile((r) => r.kind !== 'tool.approved', true),
        toArray(),
      ),
    );
    expect(call.at(-1)?.origin).toEqual({ by: 'client', identity: 'carol' });
  });
});
