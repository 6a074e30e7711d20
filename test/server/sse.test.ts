import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineMachine } from '../../src/index.js';
import { fetchJson, SseClient, type SseBlock } from '../support/sse-client.js';
import { startServer } from '../support/ws-client.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const interact = { type: 'ProcessInteraction', userId } as const;
const complete = { type: 'InteractionComplete', success: true } as const;
const isEvent = (b: SseBlock) => b.kind === 'event';

let cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

async function server(options: Parameters<typeof startServer>[0] = {}, engineOptions: Parameters<typeof startServer>[1] = {}) {
  const h = await startServer(options, engineOptions);
  cleanup.push(h.stop);
  const open = async (stream: string, query = '', headers: Record<string, string> = {}) => {
    const sse = await SseClient.open(`${h.server.httpUrl}/streams/${encodeURIComponent(stream)}/events${query}`, headers);
    cleanup.push(() => sse.close());
    return sse;
  };
  return { ...h, open };
}

describe('server: SSE', () => {
  it("sends a chat actor's seed-000 events, each with its rune's seq as id", async () => {
    const h = await server();
    await h.engine.spawn('chat', 'chat-actor');
    const sse = await h.open('chat');
    expect(sse.response.statusCode).toBe(200);
    expect(sse.response.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    await sse.next((b) => b.kind === 'comment');
    await h.engine.dispatch('chat', interact);
    await h.engine.dispatch('chat', complete);
    await h.engine.dispatch('chat', { type: 'Ping' }); // no state change: no event
    await h.engine.dispatch('chat', { type: 'Cancel', reason: 'user_cancelled' });
    await sse.next((b) => isEvent(b) && b.event === 'stopped');
    expect(sse.events).toEqual([
      { kind: 'event', id: '2', event: 'state_changed', data: { from_state: 'idle', to_state: 'running', reason: 'Processing user interaction' } },
      { kind: 'event', id: '3', event: 'state_changed', data: { from_state: 'running', to_state: 'idle', reason: 'Interaction complete' } },
      { kind: 'event', id: '5', event: 'state_changed', data: { from_state: 'idle', to_state: 'cancelled', reason: 'user_cancelled' } },
      { kind: 'event', id: '5', event: 'stopped', data: { reason: 'user_cancelled', partial_response: '' } },
    ]);
  });

  it('gives other finite machines the same events, with the rune kind as reason', async () => {
    const h = await server();
    await h.engine.spawn('call', 'tool-call', { callId: 'c1', toolName: 'grep', arguments: ['x'] });
    const sse = await h.open('call', '?lastEventId=0');
    await h.engine.dispatch('call', { type: 'no_approval_needed' });
    await h.engine.dispatch('call', { type: 'progress_update', chunk: '...' });
    await h.engine.dispatch('call', { type: 'success', output: 'found' });
    await sse.next((b) => isEvent(b) && b.event === 'stopped');
    expect(sse.events.map(({ id, event, data }) => ({ id, event, data }))).toEqual([
      { id: '2', event: 'state_changed', data: { from_state: 'pending_call', to_state: 'executing', reason: 'no_approval_needed' } },
      { id: '4', event: 'state_changed', data: { from_state: 'executing', to_state: 'completed_result', reason: 'tool.result' } },
      { id: '4', event: 'stopped', data: { reason: 'tool.result', partial_response: '' } },
    ]);
  });

  it("knows a custom machine's terminal states from the engine that hosts it", async () => {
    type Door = { value: 'open' | 'gone' };
    const door = defineMachine<Door, { type: 'demolish' }>({
      id: 'door',
      states: ['open', 'gone'],
      terminal: ['gone'],
      events: ['demolish'],
      schemas: { state: z.object({ value: z.enum(['open', 'gone']) }), event: z.object({ type: z.literal('demolish') }), input: z.void() },
      initial: () => ({ value: 'open' }),
      table: [{ from: 'open', on: 'demolish', to: 'gone' }],
    });
    const h = await server({}, { machines: { door } });
    await h.engine.spawn('d1', 'door');
    const sse = await h.open('d1', '?lastEventId=0');
    await h.engine.dispatch('d1', { type: 'demolish' });
    await sse.next((b) => isEvent(b) && b.event === 'stopped');
    expect(sse.events.map(({ event, data }) => ({ event, data }))).toEqual([
      { event: 'state_changed', data: { from_state: 'open', to_state: 'gone', reason: 'demolish' } },
      { event: 'stopped', data: { reason: 'demolish', partial_response: '' } },
    ]);
  });

  it("sends an agent session's UI flags as `derived` events: the current ones first, then each change", async () => {
    const h = await server();
    await h.engine.spawn('session', 'agent-manager-session', { autoApprove: true });
    const sse = await h.open('session');
    await sse.next((b) => isEvent(b) && b.event === 'derived');
    await h.engine.dispatch('session', { type: 'start_session', prompt: 'fix the build' });
    await h.engine.dispatch('session', { type: 'process_error', error: 'spawn_failed: ENOENT' });
    await sse.next((b) => isEvent(b) && b.event === 'derived' && b.id === '3');
    const idle = { showSpinner: false, showCancelButton: false, showResumeButton: false, showAutoModeWarning: false, inputEnabled: false, isActive: false };
    const creating = { showSpinner: true, showCancelButton: true, showResumeButton: false, showAutoModeWarning: true, inputEnabled: false, isActive: true };
    expect(sse.events.map(({ id, event, data }) => ({ id, event, data }))).toEqual([
      { id: undefined, event: 'derived', data: idle },
      { id: '2', event: 'state_changed', data: { from_state: 'idle', to_state: 'creating', reason: 'start_session' } },
      { id: '2', event: 'derived', data: creating },
      { id: '3', event: 'state_changed', data: { from_state: 'creating', to_state: 'error', reason: 'process_error' } },
      { id: '3', event: 'derived', data: idle },
    ]);

    // Resuming from the start: the flags now, then the past without flags of its own.
    const resumed = await h.open('session', '?lastEventId=0');
    await resumed.next((b) => isEvent(b) && b.id === '3');
    await h.engine.dispatch('session', { type: 'resume_session' });
    await resumed.next((b) => isEvent(b) && b.event === 'derived' && b.id === '4');
    expect(resumed.events.map(({ id, event }) => `${id ?? '-'} ${event}`)).toEqual(['- derived', '2 state_changed', '3 state_changed', '4 state_changed', '4 derived']);
  });

  it('resumes from Last-Event-ID with no gap and no duplicate', async () => {
    const h = await server();
    await h.engine.spawn('chat', 'chat-actor');
    const first = await h.open('chat');
    await first.next((b) => b.kind === 'comment');
    for (let i = 0; i < 6; i++) await h.engine.dispatch('chat', i % 2 === 0 ? interact : complete);
    const seen = await first.next((b) => isEvent(b) && b.id === '7');
    expect(seen).toMatchObject({ id: '7' });
    first.close();
    // Meanwhile, while it is away:
    for (let i = 0; i < 4; i++) await h.engine.dispatch('chat', i % 2 === 0 ? interact : complete);

    const resumed = await h.open('chat', '', { 'last-event-id': '7' });
    await resumed.next((b) => isEvent(b) && b.id === '11');
    const byQuery = await h.open('chat', '?lastEventId=7');
    await byQuery.next((b) => isEvent(b) && b.id === '11');
    const all = await h.open('chat', '?lastEventId=0');
    await all.next((b) => isEvent(b) && b.id === '11');
    expect([...first.events, ...resumed.events]).toEqual(all.events);
    expect(byQuery.events).toEqual(resumed.events);
    expect(resumed.events.map((e) => e.id)).toEqual(['8', '9', '10', '11']);
  });

  it('goes on from the current state when the runes after Last-Event-ID were pruned', async () => {
    const h = await startServer({}, { snapshotEvery: 4, retention: () => 'snapshot' });
    cleanup.push(h.stop);
    await h.engine.spawn('chat', 'chat-actor');
    for (let i = 0; i < 8; i++) await h.engine.dispatch('chat', i % 2 === 0 ? interact : complete); // seq 9; 1..8 pruned
    const sse = await SseClient.open(`${h.server.httpUrl}/streams/chat/events`, { 'last-event-id': '2' });
    cleanup.push(() => sse.close());
    await sse.next((b) => b.kind === 'comment');
    await h.engine.dispatch('chat', interact);
    expect(await sse.next(isEvent)).toMatchObject({ id: '10', event: 'state_changed', data: { from_state: 'idle', to_state: 'running' } });
  });

  it('answers 404 for an unknown stream or path, 403 when the hook refuses, 405 for another method, 400 for a bad Last-Event-ID', async () => {
    const h = await server({ authorize: (_request, stream) => stream !== 'secret' });
    await h.engine.spawn('chat', 'chat-actor');
    await h.engine.spawn('secret', 'chat-actor');
    const url = h.server.httpUrl;
    expect(await fetchJson(`${url}/streams/ghost/events`)).toMatchObject({
      status: 404,
      body: { ok: false, code: 'unknown_stream', message: 'unknown stream "ghost"' },
    });
    expect(await fetchJson(`${url}/streams/secret/events`)).toMatchObject({
      status: 403,
      body: { ok: false, code: 'forbidden', message: 'not allowed to see stream "secret"' },
    });
    expect(await fetchJson(`${url}/streams/chat`)).toMatchObject({ status: 404, body: { code: 'not_found' } });
    expect(await fetchJson(`${url}/`)).toMatchObject({ status: 404 });
    expect(await fetchJson(`${url}/streams/chat/events`, { method: 'POST' })).toMatchObject({
      status: 405,
      headers: { allow: 'GET' },
      body: { code: 'method_not_allowed' },
    });
    expect(await fetchJson(`${url}/healthz`, { method: 'DELETE' })).toMatchObject({ status: 405 });
    expect(await fetchJson(`${url}/streams/chat/events`, { headers: { 'last-event-id': 'abc' } })).toMatchObject({
      status: 400,
      body: { code: 'invalid_message' },
    });
  });

  it('/healthz counts WebSocket and SSE connections; closing the server ends SSE responses', async () => {
    const h = await server();
    await h.engine.spawn('chat', 'chat-actor');
    expect(await fetchJson(`${h.server.httpUrl}/healthz`)).toMatchObject({ status: 200, body: { ok: true, connections: 0 } });
    await h.connect();
    const sse = await h.open('chat');
    await sse.next((b) => b.kind === 'comment');
    expect(await fetchJson(`${h.server.httpUrl}/healthz`)).toEqual({
      status: 200,
      headers: expect.objectContaining({ 'content-type': 'application/json; charset=utf-8' }),
      body: { ok: true, connections: 2 },
    });
    await h.server.close();
    await sse.ended;
  });
});
