import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { chatActor } from '../../src/reducers/chat-actor/index.js';
import { createClient, type RunestreamClient } from '../../src/server/client/index.js';
import { createServer, type RunestreamServer } from '../../src/server/index.js';
import { createEngine, type Engine } from '../../src/streams/engine.js';
import { collect, countingWebSocket, recordingScheduler, valueWhere } from './fixtures.js';

type ChatState = { value: string; reason?: string };

// The client against the real server over a memory engine: what the scripted tests assume of the
// server is what it does.
describe('client with the real server', { timeout: 10_000 }, () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  const serve = async (engine: Engine, port = 0): Promise<RunestreamServer> => {
    const server = await createServer({ engine, port });
    cleanups.push(() => server.close());
    return server;
  };
  const connect = (url: string, options: Partial<Parameters<typeof createClient>[0]> = {}): RunestreamClient => {
    const client = createClient({ url, WebSocket, ...options });
    cleanups.push(() => client.close());
    return client;
  };

  it('two clients: one spawns and dispatches, both see the same state', async () => {
    const engine = createEngine();
    cleanups.push(() => engine.close());
    const server = await serve(engine);
    const alice = connect(server.url);
    const bob = connect(server.url);

    expect(await alice.spawn('chat-1', 'chat-actor')).toEqual({ seq: 1 });
    const bobSees = valueWhere(bob.state$<ChatState>('chat-1'), (s) => s.value === 'paused');
    const aliceSees = valueWhere(alice.state$<ChatState>('chat-1'), (s) => s.value === 'paused');
    expect(await alice.dispatch('chat-1', { type: 'Pause', reason: 'lunch' })).toEqual({ seq: 2 });

    const expected = chatActor.transition({ value: 'idle' }, { type: 'Pause', reason: 'lunch' });
    expect(await bobSees).toEqual(expected);
    expect(await aliceSees).toEqual(expected);
    await expect(alice.dispatch('chat-1', { type: 'Pause', reason: 'again' })).rejects.toMatchObject({ code: 'not_allowed' });
    await expect(bob.dispatch('nowhere', { type: 'Ping' })).rejects.toMatchObject({ code: 'unknown_stream' });
  });

  it('resumes after a server restart: the runes appended meanwhile arrive once each, in order', async () => {
    const engine = createEngine();
    cleanups.push(() => engine.close());
    const first = await createServer({ engine, port: 0 });
    const time = recordingScheduler();
    const client = connect(first.url, { scheduler: time.scheduler, random: () => 0.5 });
    await engine.spawn('chat-1', 'chat-actor');
    const runes = collect(client.runes$('chat-1'));
    const states = collect(client.state$<ChatState>('chat-1'));
    await valueWhere(client.state$<ChatState>('chat-1'), (s) => s.value === 'idle');
    const second = valueWhere(client.runes$('chat-1'), (r) => r.seq === 2);
    await engine.dispatch('chat-1', { type: 'Ping' });
    await second;

    await first.close();
    await valueWhere(client.connectionState$, (s) => s === 'RECONNECTING');
    await engine.dispatch('chat-1', { type: 'Pause', reason: 'while away' });
    await engine.dispatch('chat-1', { type: 'Ping' });
    await serve(engine, first.port);

    const fourth = valueWhere(client.runes$('chat-1'), (r) => r.seq === 4);
    time.flush(); // the backoff timer: reconnect, resubscribe with afterSeq 2
    await fourth;
    expect(runes.values.map((r) => r.seq)).toEqual([2, 3, 4]);
    expect(states.values.at(-1)).toMatchObject({ value: 'paused', reason: 'while away' });
    expect(states.values.at(-1)).toEqual((await engine.snapshot('chat-1'))!.state);
  });

  it('ends when the server revokes its token (close 4001) instead of reconnecting with it forever', async () => {
    const engine = createEngine();
    cleanups.push(() => engine.close());
    const tokens = new Set(['alice-token']);
    const server = await createServer({ engine, port: 0, verify: ({ token }) => (token !== undefined && tokens.has(token) ? { id: token } : undefined) });
    cleanups.push(() => server.close());
    const time = recordingScheduler();
    const sockets = countingWebSocket();
    const client = connect(server.url, { token: 'alice-token', scheduler: time.scheduler, WebSocket: sockets.WebSocket });
    await engine.spawn('chat-1', 'chat-actor');
    const states = collect(client.state$<ChatState>('chat-1'));
    const errors = collect(client.errors$);
    await valueWhere(client.state$<ChatState>('chat-1'), (s) => s.value === 'idle');

    tokens.delete('alice-token');
    await server.reauthorize();
    await valueWhere(client.connectionState$, (s) => s === 'DISCONNECTED');
    await expect(client.dispatch('chat-1', { type: 'Ping' })).rejects.toMatchObject({ code: 'closed' });
    time.flush(); // any backoff timer would fire now: there is none
    expect(time.pending).toBe(0);
    expect(sockets.created).toBe(1);
    expect(states.error).toMatchObject({ code: 'unauthorized' });
    expect(errors.values).toEqual([expect.objectContaining({ code: 'unauthorized', message: expect.stringContaining('create a client with a new token') })]);
    expect(errors.completed).toBe(true);
  });
});
