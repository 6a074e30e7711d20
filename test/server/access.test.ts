import { afterEach, describe, expect, it } from 'vitest';
import type { AccessRequest, Authorize } from '../../src/index.js';
import { fetchJson } from '../support/sse-client.js';
import { TestClient, startServer } from '../support/ws-client.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const interact = { type: 'ProcessInteraction', userId } as const;
const complete = { type: 'InteractionComplete', success: true } as const;

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

const statusOf = (promise: Promise<unknown>) => promise.then(
  () => 'connected',
  (error: { statusCode?: number }) => error.statusCode,
);

describe('server: token', () => {
  it('refuses a WebSocket upgrade without the token, or with a wrong one, with HTTP 401', async () => {
    const h = await startServer({ token: 's3cret' });
    stop = h.stop;
    expect(await statusOf(TestClient.connect(h.server.url))).toBe(401);
    expect(await statusOf(TestClient.connect(`${h.server.url}/?token=nope`))).toBe(401);
    expect(await statusOf(TestClient.connect(h.server.url, { headers: { authorization: 'Bearer nope' } }))).toBe(401);
    expect(await statusOf(TestClient.connect(h.server.url, { headers: { authorization: 'Basic s3cret' } }))).toBe(401);
    expect(h.server.connections).toBe(0);

    const byHeader = await h.connect({ headers: { authorization: 'Bearer s3cret' } });
    const byQuery = await h.connect({ path: '/?token=s3cret' });
    for (const c of [byHeader, byQuery]) expect(await c.request({ op: 'spawn', id: 1, stream: `s-${Math.random()}`, machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
  });

  it('refuses HTTP without the token (401), except GET /healthz', async () => {
    const h = await startServer({ token: 's3cret' });
    stop = h.stop;
    await h.engine.spawn('chat', 'chat-actor');
    const events = `${h.server.httpUrl}/streams/chat/events`;
    expect(await fetchJson(events)).toMatchObject({ status: 401, headers: { 'www-authenticate': 'Bearer' }, body: { ok: false, code: 'unauthorized' } });
    expect((await fetchJson(`${events}?token=wrong`)).status).toBe(401);
    expect((await fetchJson(`${h.server.httpUrl}/nowhere`)).status).toBe(401);
    expect(await fetchJson(`${h.server.httpUrl}/healthz`)).toMatchObject({ status: 200, body: { ok: true, connections: 0 } });
  });
});

describe('server: authorize', () => {
  /** Each user sees and drives "<user>/..." streams, and only sees "shared/..." ones; the user comes from a header. */
  const authorize: Authorize = (request: AccessRequest, stream, action) => {
    const user = request.headers['x-user'];
    if (stream.startsWith(`${String(user)}/`)) return true;
    return stream.startsWith('shared/') && action === 'see';
  };

  it('a connection the hook refuses a stream can neither subscribe, dispatch nor spawn it, and gets none of its runes', async () => {
    const h = await startServer({ authorize });
    stop = h.stop;
    const alice = await h.connect({ headers: { 'x-user': 'alice' } });
    const bob = await h.connect({ headers: { 'x-user': 'bob' } });
    expect(await alice.request({ op: 'spawn', id: 1, stream: 'alice/chat', machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    expect(await bob.request({ op: 'spawn', id: 1, stream: 'bob/chat', machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    await h.engine.spawn('shared/news', 'chat-actor');

    // The same answer whether or not the stream exists: nothing is revealed.
    for (const stream of ['alice/chat', 'alice/nothing-here']) {
      bob.send({ op: 'subscribe', stream });
      expect(await bob.find((m) => m.op === 'error' && m.stream === stream && m.id === undefined)).toEqual({ op: 'error', stream, code: 'forbidden', message: `not allowed to see stream "${stream}"` });
      expect(await bob.request({ op: 'dispatch', id: `d-${stream}`, stream, event: interact })).toEqual({
        op: 'error',
        id: `d-${stream}`,
        stream,
        code: 'forbidden',
        message: `not allowed to drive stream "${stream}"`,
      });
      expect(await bob.request({ op: 'spawn', id: `s-${stream}`, stream, machine: 'chat-actor' })).toMatchObject({ code: 'forbidden' });
    }
    expect(await bob.request({ op: 'dispatch', id: 4, stream: 'shared/news', event: interact })).toMatchObject({ code: 'forbidden' });

    bob.send({ op: 'subscribe', stream: 'bob/chat' });
    bob.send({ op: 'subscribe', stream: 'shared/news' });
    alice.send({ op: 'subscribe', stream: 'alice/chat' });
    await Promise.all([bob.next((m) => m.op === 'snapshot'), bob.next((m) => m.op === 'snapshot'), alice.next((m) => m.op === 'snapshot')]);
    await alice.request({ op: 'dispatch', id: 5, stream: 'alice/chat', event: interact });
    await bob.request({ op: 'dispatch', id: 6, stream: 'bob/chat', event: interact });
    await h.engine.dispatch('shared/news', interact);
    await Promise.all([alice.reach('alice/chat', 2), bob.reach('bob/chat', 2), bob.reach('shared/news', 2)]);

    const streamsSeenByBob = new Set(bob.messages.flatMap((m) => (m.op === 'rune' ? [m.rune.stream] : m.op === 'snapshot' ? [m.stream] : [])));
    expect(streamsSeenByBob).toEqual(new Set(['bob/chat', 'shared/news']));
    expect((await h.engine.snapshot('alice/chat'))!.seq).toBe(2); // bob's attempts appended nothing
  });

  it('keeps requests in order when the hook answers asynchronously and out of order', async () => {
    let calls = 0;
    // Each answer comes sooner than the one before it.
    const slowThenFast: Authorize = () => {
      const turns = 10 - Math.min(9, calls++);
      return new Promise((resolve) => {
        const wait = (n: number): void => void (n === 0 ? resolve(true) : setImmediate(() => wait(n - 1)));
        wait(turns);
      });
    };
    const h = await startServer({ authorize: slowThenFast });
    stop = h.stop;
    const c = await h.connect();
    const answers = await Promise.all([
      c.request({ op: 'spawn', id: 0, stream: 'chat', machine: 'chat-actor' }),
      ...[1, 2, 3, 4, 5, 6].map((id) => c.request({ op: 'dispatch', id, stream: 'chat', event: id % 2 === 1 ? interact : complete })),
    ]);
    expect(answers).toEqual([0, 1, 2, 3, 4, 5, 6].map((id) => ({ op: 'ack', id, seq: id + 1 })));
  });

  it("answers 'internal' when the hook throws, revealing nothing", async () => {
    const h = await startServer({
      authorize: () => {
        throw new Error('database down: secret details');
      },
    });
    stop = h.stop;
    const c = await h.connect();
    expect(await c.request({ op: 'dispatch', id: 1, stream: 'chat', event: interact })).toEqual({
      op: 'error',
      id: 1,
      stream: 'chat',
      code: 'internal',
      message: 'the authorization hook failed for stream "chat"',
    });
  });

  it('passes the presented token, the peer address and the headers to the hook', async () => {
    const seen: AccessRequest[] = [];
    const h = await startServer({ token: 't0k', authorize: (request) => (seen.push(request), true) });
    stop = h.stop;
    const c = await h.connect({ headers: { authorization: 'Bearer t0k', 'x-app': 'ui' } });
    await c.request({ op: 'spawn', id: 1, stream: 'chat', machine: 'chat-actor' });
    expect(seen[0]).toMatchObject({ token: 't0k', remoteAddress: '127.0.0.1', headers: { 'x-app': 'ui' } });
  });
});
