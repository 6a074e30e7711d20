import { describe, expect, it } from 'vitest';
import { ClientError } from '../../src/server/client/index.js';
import { answerSubscribe, collect, counterRune, refuseReconnects, setupPerTest, valueWhere } from './fixtures.js';

// The backoff timers run on a virtual-time scheduler with random() = 0.5, so each delay is half
// its exponential cap: 250, 500, 1000, ... ms with the default baseMs 500. Sockets are real.
describe('client: reconnect and resume', { timeout: 10_000 }, () => {
  const start = setupPerTest();

  it('a dropped socket: DISCONNECTED, RECONNECTING, a reconnect after the backoff, then resubscribe after the last seq seen', async () => {
    const { client, server, time, sockets } = await start();
    const states = collect(client.connectionState$);
    const errors = collect(client.errors$);
    const runes = collect(client.runes$('c-1'));
    const counts = collect(client.state$<{ count: number }>('c-1'));
    const first = await server.nextPeer();
    await answerSubscribe(first, 'c-1', 3, { value: 'counting', count: 3 });
    first.send({ op: 'rune', rune: counterRune('c-1', 4) });
    first.send({ op: 'rune', rune: counterRune('c-1', 5) });
    await valueWhere(client.state$<{ count: number }>('c-1'), (s) => s.count === 5);

    first.drop();
    await valueWhere(client.connectionState$, (s) => s === 'RECONNECTING');
    expect(time.delays).toEqual([250]); // attempt 1: 0.5 * min(30000, 500 * 2 ** 0)
    expect(sockets.created).toBe(1); // nothing happens before the timer fires

    time.flush();
    const second = await server.nextPeer();
    expect(await second.next()).toEqual({ op: 'subscribe', stream: 'c-1', afterSeq: 5 });
    // A server that resends a rune the client has seen: dropped, so runes$ sees each exactly once.
    second.send({ op: 'rune', rune: counterRune('c-1', 5) });
    second.send({ op: 'rune', rune: counterRune('c-1', 6) });
    second.send({ op: 'rune', rune: counterRune('c-1', 6) });
    second.send({ op: 'rune', rune: counterRune('c-1', 7) });
    await valueWhere(client.state$<{ count: number }>('c-1'), (s) => s.count === 7);

    expect(runes.values.map((r) => r.seq)).toEqual([4, 5, 6, 7]);
    expect(counts.values.map((s) => s.count)).toEqual([3, 4, 5, 6, 7]);
    expect(states.values).toEqual(['DISCONNECTED', 'CONNECTING', 'OPEN', 'SUBSCRIBED', 'DISCONNECTED', 'RECONNECTING', 'CONNECTING', 'OPEN', 'SUBSCRIBED']);
    // The duplicates were dropped quietly, not taken for a gap (which would resubscribe).
    expect(errors.values.map((e) => e.code)).toEqual(['connection_lost']);
  });

  it('a stream with no state yet when the socket drops asks for a snapshot again, not afterSeq', async () => {
    const { client, server, time } = await start();
    client.state$('c-1').subscribe();
    const first = await server.nextPeer();
    await first.next();
    first.drop();
    await valueWhere(client.connectionState$, (s) => s === 'RECONNECTING');
    time.flush();
    const second = await server.nextPeer();
    expect(await second.next()).toEqual({ op: 'subscribe', stream: 'c-1' });
  });

  it('failed reconnects back off exponentially with full jitter; a handshake resets the attempt', async () => {
    const env = await start();
    const { client, server, time } = env;
    const errors = collect(client.errors$);
    client.state$('c-1').subscribe();
    const first = await server.nextPeer();
    await first.next();
    await refuseReconnects(env, first, 4); // each reconnect is refused with 401
    expect(time.delays).toEqual([250, 500, 1000, 2000]);
    expect(server.attempts).toBe(4);
    expect(errors.values.at(-1)).toMatchObject({ code: 'connection_lost', message: expect.stringContaining('401') });

    server.refuse = false;
    time.flush();
    const second = await server.nextPeer();
    await second.next();
    second.drop();
    await valueWhere(client.connectionState$, (s) => s === 'RECONNECTING');
    expect(time.delays).toEqual([250, 500, 1000, 2000, 250]);
  });

  it('the backoff is capped at maxMs', async () => {
    const env = await start({ backoff: { baseMs: 100, maxMs: 300 }, random: () => 1 });
    env.client.state$('c-1').subscribe();
    const first = await env.server.nextPeer();
    await first.next();
    await refuseReconnects(env, first, 4);
    expect(env.time.delays).toEqual([100, 200, 300, 300]);
  });

  it('a request in flight when the socket drops rejects with connection_lost and is not sent again', async () => {
    const { client, server, time } = await start();
    const lost = client.dispatch('c-1', { type: 'add', by: 1 });
    const first = await server.nextPeer();
    expect(await first.next()).toMatchObject({ op: 'dispatch' });
    first.drop();
    const error = await lost.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClientError);
    expect(error).toMatchObject({ code: 'connection_lost', message: expect.stringContaining('runes') });

    time.flush();
    const second = await server.nextPeer();
    const next = client.dispatch('c-1', { type: 'add', by: 2 });
    const sent = await second.next();
    expect(sent).toMatchObject({ op: 'dispatch', event: { by: 2 } });
    second.send({ op: 'ack', id: (sent as { id: number }).id, seq: 3 });
    expect(await next).toEqual({ seq: 3 });
  });

  it('requests made while reconnecting wait and are sent on open', async () => {
    const { client, server, time } = await start();
    client.state$('c-1').subscribe();
    const first = await server.nextPeer();
    await answerSubscribe(first, 'c-1', 1, { value: 'counting', count: 0 });
    first.drop();
    await valueWhere(client.connectionState$, (s) => s === 'RECONNECTING');
    const waiting = client.dispatch('c-1', { type: 'add', by: 1 });

    time.flush();
    const second = await server.nextPeer();
    const sent = await second.next();
    expect(sent).toMatchObject({ op: 'dispatch', stream: 'c-1', event: { type: 'add', by: 1 } });
    expect(await second.next()).toEqual({ op: 'subscribe', stream: 'c-1', afterSeq: 1 });
    second.send({ op: 'ack', id: (sent as { id: number }).id, seq: 2 });
    expect(await waiting).toEqual({ seq: 2 });
  });

  it('requests made before the first socket opens survive a refused handshake and go out on the next open', async () => {
    const { client, server, time } = await start();
    server.refuse = true;
    const waiting = client.spawn('c-1', 'counter');
    await valueWhere(client.connectionState$, (s) => s === 'RECONNECTING');
    server.refuse = false;
    time.flush();
    const peer = await server.nextPeer();
    const sent = await peer.next();
    expect(sent).toMatchObject({ op: 'spawn', stream: 'c-1', machine: 'counter' });
    peer.send({ op: 'ack', id: (sent as { id: number }).id, seq: 1 });
    expect(await waiting).toEqual({ seq: 1 });
  });

  it('close() while reconnecting cancels the timer: no socket is opened again; waiting requests reject with closed', async () => {
    const { client, server, time, sockets } = await start();
    const states = collect(client.connectionState$);
    const state = collect(client.state$('c-1'));
    const first = await server.nextPeer();
    await first.next();
    first.drop();
    await valueWhere(client.connectionState$, (s) => s === 'RECONNECTING');
    const waiting = client.dispatch('c-1', { type: 'add', by: 1 }).catch((e: unknown) => e);
    expect(time.pending).toBe(1);

    await client.close();
    expect(time.pending).toBe(0);
    time.flush();
    expect(sockets.created).toBe(1);
    expect(await waiting).toMatchObject({ code: 'closed' });
    expect(state.completed).toBe(true);
    expect(states.completed).toBe(true);
    expect(states.values.slice(-2)).toEqual(['RECONNECTING', 'DISCONNECTED']);
  });

  it('close() while subscribed: closes the socket, rejects requests in flight with closed, and never reconnects', async () => {
    const { client, server, time } = await start();
    const states = collect(client.connectionState$);
    const runes = collect(client.runes$('c-1'));
    const first = await server.nextPeer();
    await first.next();
    const inFlight = client.dispatch('c-1', { type: 'add', by: 1 }).catch((e: unknown) => e);
    await first.next();

    await client.close();
    expect(await first.closed).toBe(1000);
    expect(await inFlight).toMatchObject({ code: 'closed', message: 'the client was closed before the server answered' });
    expect(runes.completed).toBe(true);
    expect(states.values).toEqual(['DISCONNECTED', 'CONNECTING', 'OPEN', 'SUBSCRIBED', 'DISCONNECTED']);
    expect(states.completed).toBe(true);
    expect(time.delays).toEqual([]);

    await expect(client.dispatch('c-1', { type: 'add', by: 1 })).rejects.toMatchObject({ code: 'closed' });
    const late = collect(client.state$('c-1'));
    expect(late.error).toMatchObject({ code: 'closed', stream: 'c-1' });
  });
});
