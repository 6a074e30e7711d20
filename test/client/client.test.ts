import { describe, expect, it } from 'vitest';
import { chatActor } from '../../src/reducers/chat-actor/index.js';
import { ClientError } from '../../src/server/client/index.js';
import { answerSubscribe, collect, counterRune, setupPerTest, valueWhere } from './fixtures.js';

// Real sockets to a scripted server on 127.0.0.1; every wait is for an event, never for time.
describe('client: connect, subscribe, fold, request', { timeout: 10_000 }, () => {
  const start = setupPerTest();

  it('connects lazily, on the first subscription, and subscribes the stream without afterSeq', async () => {
    const { client, server, sockets } = await start();
    const states = collect(client.connectionState$);
    expect(states.values).toEqual(['DISCONNECTED']);
    expect(sockets.created).toBe(0);

    client.state$('c-1').subscribe();
    const peer = await server.nextPeer();
    expect(await peer.next()).toEqual({ op: 'subscribe', stream: 'c-1' });
    expect(states.values).toEqual(['DISCONNECTED', 'CONNECTING', 'OPEN', 'SUBSCRIBED']);
    expect(sockets.created).toBe(1);
  });

  it('state$: the snapshot, then each rune folded with the machine it names; a late subscriber gets the current state', async () => {
    const { client, server } = await start();
    const seen = collect(client.state$<{ count: number }>('c-1'));
    const peer = await server.nextPeer();
    await answerSubscribe(peer, 'c-1', 1, { value: 'counting', count: 0 });
    peer.send({ op: 'rune', rune: counterRune('c-1', 2, 2) });
    peer.send({ op: 'rune', rune: counterRune('c-1', 3, 3) });
    await valueWhere(client.state$<{ count: number }>('c-1'), (s) => s.count === 5);
    expect(seen.values.map((s) => s.count)).toEqual([0, 2, 5]);

    const late = collect(client.state$<{ count: number }>('c-1'));
    expect(late.values).toEqual([{ value: 'counting', count: 5 }]);
    // The late subscriber shares the subscription: the next frame on the wire is the dispatch.
    client.dispatch('c-1', { type: 'add', by: 1 }).catch(() => {}); // never answered: rejected by close()
    expect(await peer.next()).toMatchObject({ op: 'dispatch' });
  });

  it('folds with the built-in machines by default', async () => {
    const { client, server } = await start({ machines: undefined });
    const paused = valueWhere(client.state$<{ value: string }>('chat-1'), (s) => s.value === 'paused');
    const peer = await server.nextPeer();
    await answerSubscribe(peer, 'chat-1', 1, { value: 'idle' });
    const event = { type: 'Pause', reason: 'lunch' };
    peer.send({ op: 'rune', rune: { stream: 'chat-1', seq: 2, machine: 'chat-actor', kind: 'Pause', event, from: 'idle', to: 'paused', at: 0 } });
    expect(await paused).toEqual(chatActor.transition({ value: 'idle' }, { type: 'Pause', reason: 'lunch' }));
  });

  it('folds from the spawn rune when the server replays a stream from its start', async () => {
    const { client, server } = await start();
    const counts = collect(client.state$<{ count: number }>('c-1'));
    const peer = await server.nextPeer();
    await peer.next();
    peer.send({ op: 'rune', rune: counterRune('c-1', 1) });
    peer.send({ op: 'rune', rune: counterRune('c-1', 2, 4) });
    await valueWhere(client.state$<{ count: number }>('c-1'), (s) => s.count === 4);
    expect(counts.values.map((s) => s.count)).toEqual([0, 4]);
  });

  it('spawn and dispatch resolve with the seq of their ack; each request has its own id', async () => {
    const { client, server } = await start();
    const spawned = client.spawn('c-1', 'counter', { start: 2 });
    const peer = await server.nextPeer();
    const spawn = await peer.next();
    expect(spawn).toMatchObject({ op: 'spawn', stream: 'c-1', machine: 'counter', input: { start: 2 } });
    peer.send({ op: 'ack', id: (spawn as { id: number }).id, seq: 1 });
    expect(await spawned).toEqual({ seq: 1 });

    const dispatched = client.dispatch('c-1', { type: 'add', by: 3 });
    const dispatch = await peer.next();
    expect(dispatch).toMatchObject({ op: 'dispatch', stream: 'c-1', event: { type: 'add', by: 3 } });
    expect((dispatch as { id: number }).id).not.toBe((spawn as { id: number }).id);
    peer.send({ op: 'ack', id: (dispatch as { id: number }).id, seq: 2 });
    expect(await dispatched).toEqual({ seq: 2 });
  });

  it('a request answered with an error rejects with a ClientError carrying its code and message', async () => {
    const { client, server } = await start();
    const dispatched = client.dispatch('c-1', { type: 'Cancel' });
    const peer = await server.nextPeer();
    const { id } = (await peer.next()) as { id: number };
    peer.send({ op: 'error', id, stream: 'c-1', code: 'not_allowed', message: 'event "Cancel" is not allowed in state "idle"' });
    const error = await dispatched.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClientError);
    expect(error).toMatchObject({ code: 'not_allowed', message: 'event "Cancel" is not allowed in state "idle"', stream: 'c-1' });
  });

  it('requests made before the socket opens wait, and go out on open in the order they were made', async () => {
    const { client, server } = await start();
    const answers = [client.spawn('c-1', 'counter'), client.dispatch('c-1', { type: 'add', by: 1 }), client.dispatch('c-1', { type: 'add', by: 2 })];
    const peer = await server.nextPeer();
    const sent = [await peer.next(), await peer.next(), await peer.next()];
    expect(sent.map((m) => m.op)).toEqual(['spawn', 'dispatch', 'dispatch']);
    expect(sent.map((m) => (m.op === 'dispatch' ? m.event.by : undefined))).toEqual([undefined, 1, 2]);
    sent.forEach((m, i) => peer.send({ op: 'ack', id: (m as { id: number }).id, seq: i + 1 }));
    expect(await Promise.all(answers)).toEqual([{ seq: 1 }, { seq: 2 }, { seq: 3 }]);
  });

  it('a stream subscribed by a reaction to OPEN is subscribed once, not again by the open handler', async () => {
    const { client, server } = await start();
    let reacted = false;
    client.connectionState$.subscribe((s) => {
      if (s !== 'OPEN' || reacted) return;
      reacted = true;
      client.state$('b').subscribe();
      client.dispatch('b', { type: 'add', by: 1 }).catch(() => {}); // never answered: rejected by close()
    });
    client.state$('a').subscribe();
    const peer = await server.nextPeer();
    const sent = [await peer.next(), await peer.next(), await peer.next()];
    client.dispatch('a', { type: 'add', by: 2 }).catch(() => {}); // the marker: nothing else comes before it
    sent.push(await peer.next());
    expect(sent.map((m) => `${m.op} ${m.stream}`)).toEqual(['subscribe b', 'dispatch b', 'subscribe a', 'dispatch a']);
  });

  it('a mid-stream snapshot replaces the state and the runes continue after its seq, even a seq below the last seen', async () => {
    const { client, server } = await start();
    const counts = collect(client.state$<{ count: number }>('c-1'));
    const runes = collect(client.runes$('c-1'));
    const peer = await server.nextPeer();
    await answerSubscribe(peer, 'c-1', 1, { value: 'counting', count: 0 });
    peer.send({ op: 'rune', rune: counterRune('c-1', 2) });
    peer.send({ op: 'snapshot', stream: 'c-1', seq: 10, state: { value: 'counting', count: 100 } });
    peer.send({ op: 'rune', rune: counterRune('c-1', 11) });
    // A server whose log is behind the client (restarted on an empty store) resets it with a snapshot.
    peer.send({ op: 'snapshot', stream: 'c-1', seq: 5, state: { value: 'counting', count: 50 } });
    peer.send({ op: 'rune', rune: counterRune('c-1', 6) });
    await valueWhere(client.state$<{ count: number }>('c-1'), (s) => s.count === 51);
    expect(counts.values.map((s) => s.count)).toEqual([0, 1, 100, 101, 50, 51]);
    expect(runes.values.map((r) => r.seq)).toEqual([2, 11, 6]);
  });

  it('a frame that is not a protocol message goes to errors$, is ignored, and the connection carries on', async () => {
    const { client, server, sockets } = await start();
    const errors = collect(client.errors$);
    const counts = collect(client.state$<{ count: number }>('c-1'));
    const peer = await server.nextPeer();
    await answerSubscribe(peer, 'c-1', 1, { value: 'counting', count: 0 });
    peer.send('not json');
    peer.send(JSON.stringify({ op: 'nope' }));
    peer.send(Buffer.from([1, 2, 3]));
    peer.send(JSON.stringify({ op: 'rune', rune: { ...counterRune('c-1', 2), seq: 'two' } }));
    peer.send({ op: 'ack', id: 999, seq: 3 });
    peer.send({ op: 'rune', rune: counterRune('c-1', 2) });
    await valueWhere(client.state$<{ count: number }>('c-1'), (s) => s.count === 1);

    expect(errors.values.map((e) => e.code)).toEqual([
      'invalid_server_message',
      'invalid_server_message',
      'invalid_server_message',
      'invalid_server_message',
      'unexpected_message',
    ]);
    expect(errors.values[0]!.message).toContain('not JSON');
    expect(errors.values[1]!.message).toContain('op');
    expect(errors.values[2]!.message).toContain('binary frame');
    expect(errors.values[3]!.message).toContain('rune.seq');
    expect(counts.values.map((s) => s.count)).toEqual([0, 1]);
    expect(await valueWhere(client.connectionState$, () => true)).toBe('SUBSCRIBED');
    expect(sockets.created).toBe(1);
  });

  it('an error naming a watched stream errors its state$ and runes$ with a ClientError; subscribing again retries', async () => {
    const { client, server } = await start();
    const state = collect(client.state$('ghost'));
    const runes = collect(client.runes$('ghost'));
    const peer = await server.nextPeer();
    expect(await peer.next()).toEqual({ op: 'subscribe', stream: 'ghost' });
    peer.send({ op: 'error', stream: 'ghost', code: 'unknown_stream', message: 'no stream "ghost"' });
    await valueWhere(client.connectionState$, (s) => s === 'OPEN'); // the machine unsubscribed it
    for (const seen of [state, runes]) {
      expect(seen.error).toBeInstanceOf(ClientError);
      expect(seen.error).toMatchObject({ code: 'unknown_stream', message: 'no stream "ghost"', stream: 'ghost' });
    }
    client.state$('ghost').subscribe({ error: () => {} });
    expect(await peer.next()).toEqual({ op: 'subscribe', stream: 'ghost' });
  });

  it('an error naming no request and no watched stream goes to errors$', async () => {
    const { client, server } = await start();
    const errors = collect(client.errors$);
    client.state$('c-1').subscribe();
    const peer = await server.nextPeer();
    await peer.next();
    peer.send({ op: 'error', code: 'rate_limited', message: 'slow down' });
    await valueWhere(client.errors$, () => true);
    expect(errors.values).toMatchObject([{ code: 'rate_limited', message: 'slow down' }]);
  });

  it('state$ and runes$ of one stream share one subscription; the last one to leave unsubscribes it', async () => {
    const { client, server } = await start();
    const a = client.state$('c-1').subscribe();
    const b = client.runes$('c-1').subscribe();
    const peer = await server.nextPeer();
    expect(await peer.next()).toEqual({ op: 'subscribe', stream: 'c-1' });
    a.unsubscribe();
    b.unsubscribe();
    expect(await peer.next()).toEqual({ op: 'unsubscribe', stream: 'c-1' });
    expect(await valueWhere(client.connectionState$, () => true)).toBe('OPEN');
  });

  it('a rune past the next seq is a gap: reported on errors$, and the stream is resubscribed after the last seq', async () => {
    const { client, server } = await start();
    const errors = collect(client.errors$);
    const runes = collect(client.runes$('c-1'));
    const peer = await server.nextPeer();
    await answerSubscribe(peer, 'c-1', 1, { value: 'counting', count: 0 });
    peer.send({ op: 'rune', rune: counterRune('c-1', 3) });
    expect(await peer.next()).toEqual({ op: 'unsubscribe', stream: 'c-1' });
    expect(await peer.next()).toEqual({ op: 'subscribe', stream: 'c-1', afterSeq: 1 });
    peer.send({ op: 'rune', rune: counterRune('c-1', 2) });
    peer.send({ op: 'rune', rune: counterRune('c-1', 3) });
    await valueWhere(client.runes$('c-1'), (r) => r.seq === 3);
    expect(runes.values.map((r) => r.seq)).toEqual([2, 3]);
    expect(errors.values).toMatchObject([{ code: 'rune_gap', stream: 'c-1', message: 'stream "c-1": expected rune 2, got rune 3; resubscribing after 1' }]);
  });

  it('a rune of a machine the client does not know errors state$ with unknown_machine; runes$ carries on', async () => {
    const { client, server } = await start();
    const state = collect(client.state$('m-1'));
    const runes = collect(client.runes$('m-1'));
    const peer = await server.nextPeer();
    await answerSubscribe(peer, 'm-1', 1, { value: 'x' });
    const third = valueWhere(client.runes$('m-1'), (r) => r.seq === 3);
    peer.send({ op: 'rune', rune: { ...counterRune('m-1', 2), machine: 'mystery' } });
    peer.send({ op: 'rune', rune: { ...counterRune('m-1', 3), machine: 'mystery' } });
    await third;
    expect(state.error).toMatchObject({ code: 'unknown_machine', stream: 'm-1' });
    expect((state.error as Error).message).toContain('"mystery"');
    expect(runes.values.map((r) => r.seq)).toEqual([2, 3]);
  });

  it('a spawn or dispatch that is not a valid message is rejected with invalid_message and never sent', async () => {
    const { client, server } = await start();
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    await expect(client.dispatch('', { type: 'add' })).rejects.toMatchObject({ code: 'invalid_message' });
    await expect(client.dispatch('c-1', { type: 5 } as never)).rejects.toMatchObject({ code: 'invalid_message', message: expect.stringContaining('event.type') });
    await expect(client.spawn('c-1', 'counter', circular)).rejects.toMatchObject({ code: 'invalid_message', message: expect.stringContaining('JSON') });
    client.spawn('c-2', 'counter').catch(() => {}); // never answered: rejected by close()
    const peer = await server.nextPeer();
    expect(await peer.next()).toMatchObject({ op: 'spawn', stream: 'c-2' });
  });

  it('sends the token as ?token= on the URL', async () => {
    const { client, server } = await start({ token: 's3cret/+' });
    client.state$('c-1').subscribe();
    const peer = await server.nextPeer();
    expect(new URL(peer.requestUrl, 'ws://x').searchParams.get('token')).toBe('s3cret/+');
  });
});
