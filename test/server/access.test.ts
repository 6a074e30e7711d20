import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import type { AccessRequest, Authorize, Identity, Verify } from '../../src/server/index.js';
import { SseClient, fetchJson } from '../support/sse-client.js';
import { TestClient, startServer } from '../support/ws-client.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const interact = { type: 'ProcessInteraction', userId } as const;
const complete = { type: 'InteractionComplete', success: true } as const;

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

const statusOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'connected',
    (error: { statusCode?: number }) => error.statusCode,
  );

/** A raw WebSocket upgrade request: `'upgraded'`, or the status and JSON body of the refusal. */
const upgrade = (httpUrl: string, headers: Record<string, string>) =>
  new Promise<'upgraded' | { status: number; body: unknown }>((resolve, reject) => {
    const req = request(httpUrl, {
      headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', ...headers },
    });
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      resolve('upgraded');
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end();
  });

/** Per-user tokens: each token verifies as its user; a token deleted from the map no longer does. */
const perUserTokens =
  (tokens: Map<string, string>): Verify =>
  (credential) => {
    const user = credential.token === undefined ? undefined : tokens.get(credential.token);
    return user === undefined ? undefined : { id: user };
  };

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
  });

  it('GET /healthz tells liveness only without the credential, and the connection count with it', async () => {
    const h = await startServer({ token: 's3cret' });
    stop = h.stop;
    await h.connect({ path: '/?token=s3cret' });
    expect(await fetchJson(`${h.server.httpUrl}/healthz`)).toMatchObject({ status: 200, body: { ok: true } });
    expect((await fetchJson(`${h.server.httpUrl}/healthz`)).body).toEqual({ ok: true });
    expect((await fetchJson(`${h.server.httpUrl}/healthz?token=wrong`)).body).toEqual({ ok: true });
    expect((await fetchJson(`${h.server.httpUrl}/healthz`, { headers: { authorization: 'Bearer s3cret' } })).body).toEqual({ ok: true, connections: 1 });
  });
});

describe('server: Origin and Host', () => {
  it('refuses an upgrade from a foreign Origin with 403 forbidden_origin before any WebSocket exists, so nothing it sends is applied', async () => {
    const h = await startServer();
    stop = h.stop;
    expect(await upgrade(h.server.httpUrl, { origin: 'http://evil.example' })).toEqual({
      status: 403,
      body: {
        ok: false,
        code: 'forbidden_origin',
        message: `origin "http://evil.example" is not allowed: only this server's own origins (http://127.0.0.1:${h.server.port}, http://localhost:${h.server.port}, http://[::1]:${h.server.port}) and clients that send no Origin are; allow it with the "allowedOrigins" option (runestream serve --allow-origin http://evil.example)`,
      },
    });
    // A browser-like client: it opens the socket and means to spawn at once.
    const attacker = TestClient.connect(h.server.url, { origin: 'http://evil.example' }).then((c) => {
      c.send({ op: 'spawn', id: 1, stream: 'pwned', machine: 'chat-actor' });
      return c;
    });
    expect(await statusOf(attacker)).toBe(403);
    // Another port of the same host is another origin.
    expect(await statusOf(TestClient.connect(h.server.url, { origin: `http://127.0.0.1:${h.server.port + 1}` }))).toBe(403);
    expect(h.server.connections).toBe(0);
    expect(await h.engine.snapshot('pwned')).toBeUndefined();
  });

  it("accepts the server's own origins and clients that send no Origin", async () => {
    const h = await startServer();
    stop = h.stop;
    const origins = [
      undefined,
      `http://127.0.0.1:${h.server.port}`,
      `http://localhost:${h.server.port}`,
      `http://[::1]:${h.server.port}`,
      `HTTP://LOCALHOST:${h.server.port}/page`,
    ];
    for (const [i, origin] of origins.entries()) {
      const c = await h.connect(origin === undefined ? {} : { origin });
      expect(await c.request({ op: 'spawn', id: i, stream: `own-${i}`, machine: 'chat-actor' })).toEqual({ op: 'ack', id: i, seq: 1 });
    }
  });

  it('brackets an IPv6 host in its own origin and host names', async () => {
    const h = await startServer({ host: '::1' });
    stop = h.stop;
    const c = await h.connect({ origin: `http://[::1]:${h.server.port}` });
    expect(await c.request({ op: 'spawn', id: 1, stream: 'v6', machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    expect(await upgrade(h.server.httpUrl, { origin: `http://[::2]:${h.server.port}` })).toMatchObject({ status: 403, body: { code: 'forbidden_origin' } });
  });

  it('accepts the allowedOrigins (normalized), and every origin with "*"', async () => {
    const h = await startServer({ allowedOrigins: ['http://App.example:5173/index.html'] });
    stop = h.stop;
    const app = await h.connect({ origin: 'http://app.example:5173' });
    expect(await app.request({ op: 'spawn', id: 1, stream: 'app', machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    expect(await statusOf(TestClient.connect(h.server.url, { origin: 'https://app.example:5173' }))).toBe(403);
    expect(await statusOf(TestClient.connect(h.server.url, { origin: 'null' }))).toBe(403);

    const open = await startServer({ allowedOrigins: ['*'] });
    const anywhere = await open.connect({ origin: 'http://anywhere.example' });
    expect(await anywhere.request({ op: 'spawn', id: 1, stream: 'any', machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    await open.stop();
  });

  it('refuses SSE from a foreign Origin with 403, and tells such a page only liveness on /healthz', async () => {
    const h = await startServer();
    stop = h.stop;
    await h.engine.spawn('chat', 'chat-actor');
    const evil = { origin: 'http://evil.example' };
    expect(await fetchJson(`${h.server.httpUrl}/streams/chat/events`, { headers: evil })).toMatchObject({ status: 403, body: { ok: false, code: 'forbidden_origin' } });
    expect((await fetchJson(`${h.server.httpUrl}/healthz`, { headers: evil })).body).toEqual({ ok: true });
    expect((await fetchJson(`${h.server.httpUrl}/healthz`)).body).toEqual({ ok: true, connections: 0 });
    const own = await SseClient.open(`${h.server.httpUrl}/streams/chat/events`, { origin: `http://localhost:${h.server.port}` });
    expect(own.response.statusCode).toBe(200);
    own.close();
  });

  it('refuses a Host that is not a name of the server when no credential is configured (DNS rebinding)', async () => {
    const h = await startServer();
    stop = h.stop;
    await h.engine.spawn('chat', 'chat-actor');
    const rebound = { host: `evil.example:${h.server.port}` };
    expect(await fetchJson(`${h.server.httpUrl}/streams/chat/events`, { headers: rebound })).toMatchObject({
      status: 403,
      body: {
        ok: false,
        code: 'forbidden_host',
        message: `Host "evil.example:${h.server.port}" is not a name of this server (127.0.0.1:${h.server.port}, localhost:${h.server.port}, [::1]:${h.server.port}): with no credential configured only these are served (a defense against DNS rebinding); set "token" or "verify" to serve other names`,
      },
    });
    expect(await upgrade(h.server.httpUrl, rebound)).toMatchObject({ status: 403, body: { code: 'forbidden_host' } });
    expect(await upgrade(h.server.httpUrl, { host: `localhost:${h.server.port}` })).toBe('upgraded');
    expect(await h.engine.snapshot('chat')).toMatchObject({ seq: 1 });

    // With a credential configured, any name may reach the server; the credential decides.
    const withToken = await startServer({ token: 's3cret' });
    expect(await upgrade(withToken.server.httpUrl, { host: `evil.example:${withToken.server.port}`, authorization: 'Bearer s3cret' })).toBe('upgraded');
    await withToken.stop();
  });
});

describe('server: authorize', () => {
  /** Each user sees and drives "<user>/..." streams, and only sees "shared/..." ones; the user is the verified identity. */
  const authorize: Authorize = (request: AccessRequest, stream, action) => {
    if (stream.startsWith(`${request.identity.id}/`)) return true;
    return stream.startsWith('shared/') && action === 'see';
  };
  const verify = perUserTokens(
    new Map([
      ['alice-token', 'alice'],
      ['bob-token', 'bob'],
    ]),
  );

  it('a connection the hook refuses a stream can neither subscribe, dispatch nor spawn it, and gets none of its runes, whatever headers it sends', async () => {
    const h = await startServer({ verify, authorize });
    stop = h.stop;
    const alice = await h.connect({ headers: { authorization: 'Bearer alice-token' } });
    // An "x-user" header claims nothing: the identity comes from the token.
    const bob = await h.connect({ headers: { authorization: 'Bearer bob-token', 'x-user': 'alice' } });
    expect(await alice.request({ op: 'spawn', id: 1, stream: 'alice/chat', machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    expect(await bob.request({ op: 'spawn', id: 1, stream: 'bob/chat', machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    await h.engine.spawn('shared/news', 'chat-actor');

    // The same answer whether or not the stream exists: nothing is revealed.
    for (const stream of ['alice/chat', 'alice/nothing-here']) {
      bob.send({ op: 'subscribe', stream });
      expect(await bob.find((m) => m.op === 'error' && m.stream === stream && m.id === undefined)).toEqual({
        op: 'error',
        stream,
        code: 'forbidden',
        message: `not allowed to see stream "${stream}"`,
      });
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

  it('passes the identity, the presented token, the peer address and the headers to the hook', async () => {
    const seen: AccessRequest[] = [];
    const h = await startServer({ token: 't0k', authorize: (request) => (seen.push(request), true) });
    stop = h.stop;
    const c = await h.connect({ headers: { authorization: 'Bearer t0k', 'x-app': 'ui' } });
    await c.request({ op: 'spawn', id: 1, stream: 'chat', machine: 'chat-actor' });
    expect(seen[0]).toMatchObject({ identity: { id: 'token' }, token: 't0k', remoteAddress: '127.0.0.1', headers: { 'x-app': 'ui' } });

    const anonymous = await startServer({ authorize: (request) => (seen.push(request), true) });
    const a = await anonymous.connect();
    await a.request({ op: 'spawn', id: 1, stream: 'chat', machine: 'chat-actor' });
    expect(seen[1]!.identity).toEqual({ id: 'anonymous' });
    await anonymous.stop();
  });
});

describe('server: verify and revocation', () => {
  it('verifies each credential into an identity: 401 when verify refuses it, 500 when it throws', async () => {
    const seen: unknown[] = [];
    const verify: Verify = async (credential) => {
      seen.push(credential);
      if (credential.token === 'boom') throw new Error('directory down: secret details');
      return credential.token === 'alice-token' ? { id: 'alice', role: 'admin' } : undefined;
    };
    const identities: Identity[] = [];
    const h = await startServer({ verify, authorize: (request) => (identities.push(request.identity), true) });
    stop = h.stop;
    expect(await statusOf(TestClient.connect(h.server.url))).toBe(401);
    expect(await statusOf(TestClient.connect(`${h.server.url}/?token=bob-token`))).toBe(401);
    expect(await upgrade(h.server.httpUrl, { authorization: 'Bearer boom' })).toEqual({
      status: 500,
      body: { ok: false, code: 'internal', message: 'the verify hook failed' },
    });
    expect(await fetchJson(`${h.server.httpUrl}/streams/x/events?token=boom`)).toMatchObject({ status: 500, body: { code: 'internal', message: 'the verify hook failed' } });
    const alice = await h.connect({ path: '/?token=alice-token' });
    expect(await alice.request({ op: 'spawn', id: 1, stream: 'chat', machine: 'chat-actor' })).toMatchObject({ op: 'ack' });
    expect(identities).toEqual([{ id: 'alice', role: 'admin' }]);
    expect(seen.at(-1)).toMatchObject({ token: 'alice-token', remoteAddress: '127.0.0.1' });
  });

  it("reauthorize() cuts a live subscription whose access was revoked, naming the stream, while another client's goes on", async () => {
    const grants = new Map([
      ['alice', new Set(['team/chat', 'alice/notes'])],
      ['bob', new Set(['team/chat'])],
    ]);
    const authorize: Authorize = (request, stream) => grants.get(request.identity.id)?.has(stream) === true;
    const verify = perUserTokens(
      new Map([
        ['alice-token', 'alice'],
        ['bob-token', 'bob'],
      ]),
    );
    const h = await startServer({ verify, authorize });
    stop = h.stop;
    await h.engine.spawn('team/chat', 'chat-actor');
    await h.engine.spawn('alice/notes', 'chat-actor');
    const alice = await h.connect({ headers: { authorization: 'Bearer alice-token' } });
    const bob = await h.connect({ headers: { authorization: 'Bearer bob-token' } });
    for (const [client, stream] of [
      [alice, 'team/chat'],
      [alice, 'alice/notes'],
      [bob, 'team/chat'],
    ] as const) {
      client.send({ op: 'subscribe', stream });
      await client.reach(stream, 1);
    }
    const aliceSse = await SseClient.open(`${h.server.httpUrl}/streams/team%2Fchat/events?token=alice-token`);
    const bobSse = await SseClient.open(`${h.server.httpUrl}/streams/team%2Fchat/events?token=bob-token`);
    expect([aliceSse.response.statusCode, bobSse.response.statusCode]).toEqual([200, 200]);

    grants.get('alice')!.delete('team/chat');
    await h.server.reauthorize();
    expect(await alice.find((m) => m.op === 'error')).toEqual({ op: 'error', stream: 'team/chat', code: 'forbidden', message: 'access to stream "team/chat" was revoked' });
    await aliceSse.ended;
    expect(aliceSse.blocks.at(-1)).toEqual({ kind: 'comment', text: 'forbidden: access to stream "team/chat" was revoked' });

    await h.engine.dispatch('team/chat', interact);
    await h.engine.dispatch('team/chat', complete);
    await bob.reach('team/chat', 3);
    await bobSse.next((b) => b.kind === 'event' && b.id === '3');
    // Answered on alice's socket after the runes reached bob: any team/chat frame for her would have come first.
    expect(await alice.request({ op: 'dispatch', id: 1, stream: 'alice/notes', event: interact })).toMatchObject({ op: 'ack' });
    expect(alice.runes('team/chat')).toEqual([]);
    expect(bob.runes('team/chat').map((r) => r.seq)).toEqual([2, 3]);
    // Her other subscription goes on; her access to team/chat is gone for new requests too.
    await alice.reach('alice/notes', 2);
    alice.send({ op: 'subscribe', stream: 'team/chat' });
    expect(await alice.next((m) => m.op === 'error' && m.message.startsWith('not allowed'))).toMatchObject({ code: 'forbidden', stream: 'team/chat' });
  });

  it('reauthorize() closes the connections of a revoked token with 4001 and ends its SSE responses', async () => {
    const tokens = new Map([
      ['alice-token', 'alice'],
      ['bob-token', 'bob'],
    ]);
    const h = await startServer({ verify: perUserTokens(tokens) });
    stop = h.stop;
    await h.engine.spawn('chat', 'chat-actor');
    const alice = await h.connect({ path: '/?token=alice-token' });
    const bob = await h.connect({ path: '/?token=bob-token' });
    alice.send({ op: 'subscribe', stream: 'chat' });
    await alice.reach('chat', 1);
    const aliceSse = await SseClient.open(`${h.server.httpUrl}/streams/chat/events`, { authorization: 'Bearer alice-token' });

    tokens.delete('alice-token');
    await h.server.reauthorize();
    expect(await alice.closed).toEqual({ code: 4001, reason: 'unauthorized' });
    await aliceSse.ended;
    expect(await bob.request({ op: 'dispatch', id: 1, stream: 'chat', event: interact })).toEqual({ op: 'ack', id: 1, seq: 2 });
    expect(await statusOf(TestClient.connect(`${h.server.url}/?token=alice-token`))).toBe(401);
    expect(h.server.connections).toBe(1);
  });
});
