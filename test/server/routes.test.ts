import { once } from 'node:events';
import { createServer as createHttpServer, request, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createEngine } from '../../src/index.js';
import { createServer, type Route, type RunestreamServer } from '../../src/server/index.js';
import { fetchJson } from '../support/sse-client.js';
import { startServer, TestClient } from '../support/ws-client.js';

let cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

async function server(options: Parameters<typeof startServer>[0] = {}) {
  const h = await startServer(options);
  cleanup.push(h.stop);
  return h;
}

/** A user route that answers its params, who asked and its JSON body; `calls` counts its runs. */
function echoRoute(): Route & { calls: number } {
  const route = {
    calls: 0,
    method: 'POST',
    path: '/agents/:id/say',
    handler: (_req, res, { params, access, body, url }) => {
      route.calls++;
      const text = JSON.stringify({ params, identity: access.identity, body: JSON.parse(body.toString('utf8')), query: url.searchParams.get('q') });
      res.writeHead(200, { 'content-type': 'application/json' }).end(text);
    },
  } satisfies Route & { calls: number };
  return route;
}

/** A POST whose body is sent chunked (no Content-Length), so only the bytes read can tell its size. */
function postChunked(url: string, chunks: readonly string[]): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST' }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    for (const chunk of chunks) req.write(chunk);
    req.end();
  });
}

describe('server: routes', () => {
  it('runs a user POST route with its decoded params, the verified identity and the JSON body', async () => {
    const say = echoRoute();
    const h = await server({ token: 's3cret', routes: [say] });
    const answer = await fetchJson(`${h.server.httpUrl}/agents/a%20b/say?q=1`, {
      method: 'POST',
      headers: { authorization: 'Bearer s3cret', 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'hello' }),
    });
    expect(answer).toMatchObject({ status: 200, body: { params: { id: 'a b' }, identity: { id: 'token' }, body: { text: 'hello' }, query: '1' } });
    expect(await fetchJson(`${h.server.httpUrl}/agents/%E0%A4%A/say`, { method: 'POST', headers: { authorization: 'Bearer s3cret' }, body: '{}' })).toMatchObject({
      status: 400,
      body: { ok: false, code: 'invalid_message', message: 'the :id parameter in /agents/%E0%A4%A/say is not valid percent-encoding' },
    });
    expect(say.calls).toBe(1);
  });

  it('answers 404 for no path, 405 with Allow listing the methods of the path', async () => {
    const say = echoRoute();
    const read: Route = { method: 'GET', path: '/agents/:id/say', handler: (_req, res) => void res.end('{}') };
    const h = await server({ routes: [say, read] });
    const url = h.server.httpUrl;
    expect(await fetchJson(`${url}/agents/a/shout`, { method: 'POST' })).toMatchObject({ status: 404, body: { ok: false, code: 'not_found' } });
    expect(await fetchJson(`${url}/agents/a/say`, { method: 'DELETE' })).toMatchObject({
      status: 405,
      headers: { allow: 'POST, GET' },
      body: { ok: false, code: 'method_not_allowed', message: 'DELETE is not allowed on /agents/a/say; use POST, GET' },
    });
    expect(await fetchJson(`${url}/healthz`, { method: 'POST' })).toMatchObject({ status: 405, headers: { allow: 'GET' } });
    expect(say.calls).toBe(0);
  });

  it('answers 413 body_too_large past maxBodyBytes, by Content-Length or by the bytes read, without running the handler', async () => {
    const say = echoRoute();
    const h = await server({ routes: [say], maxBodyBytes: 16 });
    const url = `${h.server.httpUrl}/agents/a/say`;
    const tooLarge = { ok: false, code: 'body_too_large', message: 'the body of POST /agents/a/say is larger than maxBodyBytes (16 bytes)' };
    expect(await fetchJson(url, { method: 'POST', body: JSON.stringify({ text: '012345' }) })).toMatchObject({ status: 413, body: tooLarge }); // 17 bytes
    expect(await postChunked(url, ['{"text":', '"012345"}'])).toEqual({ status: 413, body: tooLarge }); // 17 bytes
    expect(say.calls).toBe(0);
    expect(await postChunked(url, ['{"text":', '"01234"}'])).toMatchObject({ status: 200, body: { body: { text: '01234' } } }); // 16 bytes
    expect(say.calls).toBe(1);
  });

  it('answers 500 internal for a handler that throws or rejects, and carries on', async () => {
    const routes: Route[] = [
      {
        method: 'POST',
        path: '/throws',
        handler: () => {
          throw new Error('secret detail');
        },
      },
      { method: 'GET', path: '/rejects', handler: async () => Promise.reject(new Error('secret detail')) },
    ];
    const h = await server({ routes });
    const client = await h.connect();
    expect(await fetchJson(`${h.server.httpUrl}/throws`, { method: 'POST', body: '{}' })).toEqual(
      expect.objectContaining({ status: 500, body: { ok: false, code: 'internal', message: 'the handler of POST /throws failed' } }),
    );
    expect(await fetchJson(`${h.server.httpUrl}/rejects`)).toMatchObject({ status: 500, body: { code: 'internal', message: 'the handler of GET /rejects failed' } });
    // The server, and a client connected before, carry on.
    client.send({ op: 'spawn', id: 1, stream: 's', machine: 'chat-actor' });
    expect(await client.next((m) => m.op === 'ack')).toEqual({ op: 'ack', id: 1, seq: 1 });
    expect(await fetchJson(`${h.server.httpUrl}/healthz`)).toMatchObject({ status: 200, body: { ok: true, connections: 1 } });
  });

  it('puts user routes behind the access checks: a foreign Origin is 403, a missing credential 401', async () => {
    const say = echoRoute();
    const open = await server({ routes: [say] });
    expect(await fetchJson(`${open.server.httpUrl}/agents/a/say`, { method: 'POST', headers: { origin: 'http://evil.example' }, body: '{}' })).toMatchObject({
      status: 403,
      body: { code: 'forbidden_origin' },
    });
    const guarded = await server({ token: 't', routes: [say] });
    expect(await fetchJson(`${guarded.server.httpUrl}/agents/a/say`, { method: 'POST', body: '{}' })).toMatchObject({
      status: 401,
      body: { code: 'unauthorized' },
    });
    // Before telling 404 from 405 too: a refused request learns nothing of the routes.
    expect(await fetchJson(`${guarded.server.httpUrl}/agents/a/say`, { method: 'DELETE' })).toMatchObject({ status: 401 });
    expect(say.calls).toBe(0);
  });
});

describe('server: attached to an existing node:http server', () => {
  /** A plain node:http app with its own route `/hello` (and its own 404), passing requests to `hosted` first. */
  async function hostApp(hosted: { runestream?: RunestreamServer } = {}): Promise<Server> {
    const app = createHttpServer((req, res) => {
      if (hosted.runestream?.handle(req, res) === true) return;
      const own = req.url === '/hello';
      res.writeHead(own ? 200 : 404, { 'content-type': 'application/json' }).end(JSON.stringify({ from: 'host', url: req.url }));
    });
    app.listen(0, '127.0.0.1');
    await once(app, 'listening');
    cleanup.push(() => new Promise<void>((resolve) => app.close(() => resolve())));
    return app;
  }

  it('serves its routes and upgrades through handle(), leaves the rest to the host, and closes only its own part', async () => {
    const hosted: { runestream?: RunestreamServer } = {};
    const app = await hostApp(hosted);
    const engine = createEngine();
    cleanup.push(() => engine.close());
    const runestream = await createServer({ engine, server: app, routes: [echoRoute()] });
    hosted.runestream = runestream;
    const base = `http://127.0.0.1:${(app.address() as { port: number }).port}`;
    expect(runestream.httpUrl).toBe(base);

    expect(await fetchJson(`${base}/hello`)).toMatchObject({ status: 200, body: { from: 'host' } });
    expect(await fetchJson(`${base}/elsewhere`)).toMatchObject({ status: 404, body: { from: 'host' } });
    expect(await fetchJson(`${base}/agents/x/say`, { method: 'POST', body: '{"n":1}' })).toMatchObject({ status: 200, body: { params: { id: 'x' }, body: { n: 1 } } });

    const client = await TestClient.connect(runestream.url);
    client.send({ op: 'spawn', id: 1, stream: 's', machine: 'chat-actor' });
    expect(await client.next((m) => m.op === 'ack')).toEqual({ op: 'ack', id: 1, seq: 1 });
    await expect(TestClient.connect(runestream.url, { origin: 'http://evil.example' })).rejects.toMatchObject({ statusCode: 403 });
    expect(await fetchJson(`${base}/healthz`)).toMatchObject({ status: 200, body: { ok: true, connections: 1 } });

    await runestream.close();
    expect(await client.closed).toMatchObject({ code: 1001 });
    // The host app carries on; runestream's paths are its own again.
    expect(app.listening).toBe(true);
    expect(await fetchJson(`${base}/healthz`)).toMatchObject({ status: 404, body: { from: 'host' } });
    expect(await fetchJson(`${base}/hello`)).toMatchObject({ status: 200 });
  });

  it('refuses a server that does not listen yet, one open to the network with no credential, and a host or port next to it', async () => {
    const engine = createEngine();
    cleanup.push(() => engine.close());
    const idle = createHttpServer();
    await expect(createServer({ engine, server: idle })).rejects.toThrow(
      new TypeError('createServer: "server" must be listening on a TCP port: create runestream once its listen() has called back'),
    );
    const network = createHttpServer().listen(0, '0.0.0.0');
    await once(network, 'listening');
    cleanup.push(() => new Promise<void>((resolve) => network.close(() => resolve())));
    await expect(createServer({ engine, server: network })).rejects.toThrow(
      new TypeError('createServer: "host" "0.0.0.0" is not a loopback address and neither "token" nor "verify" is set: set one to serve the network, or use host "127.0.0.1"'),
    );
    const app = await hostApp();
    await expect(createServer({ engine, server: app, host: '127.0.0.1' })).rejects.toThrow(
      new TypeError(`createServer: "host" and "server" are both set: an attached server's address and timeouts are the host server's`),
    );
  });
});

describe('CORS for the origins allowedOrigins lets in', () => {
  const app = 'http://app.example:5173';
  const preflight = (url: string, origin: string, method = 'POST') =>
    fetchJson(url, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': 'authorization, content-type' } });

  it('answers a preflight from an allowed origin with the path’s methods and the headers a client sends, and names the origin on the answer itself', async () => {
    const route = echoRoute();
    const h = await server({ token: 's3cret', allowedOrigins: [app], routes: [route] });
    const url = `${h.server.httpUrl}/agents/a/say`;
    const answer = await preflight(url, app);
    expect(answer.status).toBe(204);
    expect(answer.headers).toMatchObject({
      'access-control-allow-origin': app,
      'access-control-allow-methods': 'POST',
      'access-control-allow-headers': 'authorization, content-type, accept, last-event-id',
      vary: 'Origin',
    });
    expect(route.calls).toBe(0); // a preflight carries no credential and runs nothing
    const post = await fetchJson(url, { method: 'POST', headers: { origin: app, authorization: 'Bearer s3cret' }, body: '{}' });
    expect(post.status).toBe(200);
    expect(post.headers['access-control-allow-origin']).toBe(app);
    // A refusal names it too, so the page can read why.
    const refused = await fetchJson(url, { method: 'POST', headers: { origin: app }, body: '{}' });
    expect(refused).toMatchObject({ status: 401, headers: { 'access-control-allow-origin': app } });
  });

  it('refuses a preflight from an origin not allowed (403 forbidden_origin, no CORS header); its own origin needs none', async () => {
    const h = await server({ token: 's3cret', allowedOrigins: [app], routes: [echoRoute()] });
    const url = `${h.server.httpUrl}/agents/a/say`;
    const evil = await preflight(url, 'http://evil.example');
    expect(evil).toMatchObject({ status: 403, body: { code: 'forbidden_origin' } });
    expect(evil.headers['access-control-allow-origin']).toBeUndefined();
    const own = await preflight(url, h.server.httpUrl);
    expect(own.status).toBe(204);
    expect(own.headers['access-control-allow-origin']).toBeUndefined();
    const post = await fetchJson(url, { method: 'POST', headers: { origin: h.server.httpUrl, authorization: 'Bearer s3cret' }, body: '{}' });
    expect(post.status).toBe(200);
    expect(post.headers['access-control-allow-origin']).toBeUndefined();
  });
});
