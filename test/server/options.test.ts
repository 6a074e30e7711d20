import { createServer as createHttpServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createEngine } from '../../src/index.js';
import { createServer, type ServerOptions } from '../../src/server/index.js';
import { isLoopbackHost } from '../../src/server/access.js';

const engine = createEngine();
afterAll(() => engine.close());
const refuse = (options: Partial<ServerOptions>) => createServer({ engine, port: 0, ...options } as ServerOptions);

describe('server options', () => {
  it.each([
    [{ engine: undefined }, 'createServer: "engine" is required: an Engine from createEngine(), got undefined'],
    [
      { host: '0.0.0.0' },
      'createServer: "host" "0.0.0.0" is not a loopback address and neither "token" nor "verify" is set: set one to serve the network, or use host "127.0.0.1"',
    ],
    [{ host: '' }, 'createServer: "host" must be a non-empty string, got ""'],
    [{ port: 70_000 }, 'createServer: "port" must be an integer from 0 to 65535, got 70000'],
    [{ port: 1.5 }, 'createServer: "port" must be an integer from 0 to 65535, got 1.5'],
    [{ token: '' }, 'createServer: "token" must be a non-empty string, got ""'],
    [{ verify: 'yes' }, 'createServer: "verify" must be a function (credential) => Identity | undefined, got "yes"'],
    [{ token: 't', verify: () => ({ id: 'a' }) }, 'createServer: "token" and "verify" are both set: set one ("token" is a shorthand for a verify that compares it)'],
    [{ allowedOrigins: 'http://a.example' }, 'createServer: "allowedOrigins" must be an array of origins, got "http://a.example"'],
    [{ allowedOrigins: ['a.example'] }, `createServer: "allowedOrigins" must hold origins like "https://app.example:8443" (or '*'), got "a.example"`],
    [{ allowedOrigins: ['file:///index.html'] }, `createServer: "allowedOrigins" must hold origins like "https://app.example:8443" (or '*'), got "file:///index.html"`],
    [{ authorize: 'yes' }, 'createServer: "authorize" must be a function (request, stream, action) => boolean, got "yes"'],
    [{ maxFrameBytes: 0 }, 'createServer: "maxFrameBytes" must be a positive integer, got 0'],
    [{ maxBufferedBytes: -1 }, 'createServer: "maxBufferedBytes" must be a positive integer, got -1'],
    [{ maxFrameBytes: 2048, maxPayloadBytes: 1024 }, 'createServer: "maxPayloadBytes" (1024) must be >= "maxFrameBytes" (2048): frames between them get "frame_too_large"'],
    [{ slowClient: 'drop' }, `createServer: "slowClient" must be 'coalesce' or 'close', got "drop"`],
    [
      { dispatchRate: { perSecond: 0, burst: 1 } },
      'createServer: "dispatchRate" must be { perSecond: a positive number, burst: an integer >= 1 }, got {"perSecond":0,"burst":1}',
    ],
    [
      { dispatchRate: { perSecond: 5, burst: 0.5 } },
      'createServer: "dispatchRate" must be { perSecond: a positive number, burst: an integer >= 1 }, got {"perSecond":5,"burst":0.5}',
    ],
    [{ heartbeatMs: -5 }, 'createServer: "heartbeatMs" must be a non-negative integer (0: off), got -5'],
    [{ onDrive: 'count' }, 'createServer: "onDrive" must be a function (identity, message) => ((accepted) => void) | undefined, got "count"'],
    [{ scheduler: {} }, 'createServer: "scheduler" must be an rxjs SchedulerLike, got [object Object]'],
    [{ messageTimeoutMs: 0 }, 'createServer: "messageTimeoutMs" must be a positive integer, got 0'],
    [{ maxInboundBytes: 1.5 }, 'createServer: "maxInboundBytes" must be a positive integer, got 1.5'],
    [
      { maxInboundBytes: 1024, maxPayloadBytes: 2048, maxFrameBytes: 512 },
      'createServer: "maxInboundBytes" (1024) must be >= "maxPayloadBytes" (2048): else one allowed message could be refused',
    ],
    [{ handshakeTimeoutMs: -1 }, 'createServer: "handshakeTimeoutMs" must be a positive integer, got -1'],
    [{ maxSubscriptions: 0 }, 'createServer: "maxSubscriptions" must be a positive integer, got 0'],
    [{ maxRequestsInFlight: '8' }, 'createServer: "maxRequestsInFlight" must be a positive integer, got "8"'],
    [{ maxFrameBytes: 2 * 1024 * 1024 }, 'createServer: "maxPayloadBytes" (1048576) must be >= "maxFrameBytes" (2097152): frames between them get "frame_too_large"'],
    [{ maxBodyBytes: 0 }, 'createServer: "maxBodyBytes" must be a positive integer, got 0'],
    [{ routes: {} }, 'createServer: "routes" must be an array of { method, path, handler }, got [object Object]'],
    [{ routes: [{ method: 'post', path: '/x', handler: () => {} }] }, `createServer: "routes"[0] has method "post": use an uppercase HTTP method such as 'GET' or 'POST'`],
    [{ routes: [{ method: 'POST', path: 'x', handler: () => {} }] }, `createServer: "routes"[0] has path "x": a path starts with '/'`],
    [{ routes: [{ method: 'POST', path: '/a/:id/:id', handler: () => {} }] }, 'createServer: "routes"[0] has the parameter ":id" twice in /a/:id/:id'],
    [{ routes: [{ method: 'POST', path: '/x' }] }, 'createServer: "routes"[0] has no handler: "handler" must be a function (req, res, context)'],
    [
      { routes: [{ method: 'POST', path: '/streams/:id/events', handler: () => {} }] },
      'createServer: "routes"[0] (POST /streams/:id/events) clashes with the built-in route GET /streams/:stream/events',
    ],
    [{ routes: [{ method: 'GET', path: '/healthz', handler: () => {} }] }, 'createServer: "routes"[0] (GET /healthz) clashes with the built-in route GET /healthz'],
    [
      {
        routes: [
          { method: 'POST', path: '/agents/:id', handler: () => {} },
          { method: 'GET', path: '/agents/:id', handler: () => {} },
          { method: 'POST', path: '/agents/one', handler: () => {} },
        ],
      },
      'createServer: "routes"[2] (POST /agents/one) clashes with "routes"[0] (/agents/:id)',
    ],
    [{ server: 'http' }, 'createServer: "server" must be a node:http Server, got "http"'],
    [
      { server: createHttpServer(), handshakeTimeoutMs: 5 },
      `createServer: "port", "handshakeTimeoutMs" and "server" are both set: an attached server's address and timeouts are the host server's`,
    ],
    [
      { heartbeat: 5 },
      'createServer: unknown option "heartbeat"; the options are engine, host, port, token, authorize, spawnable, maxFrameBytes, maxPayloadBytes, maxBufferedBytes, slowClient, dispatchRate, heartbeatMs, scheduler, verify, allowedOrigins, messageTimeoutMs, maxInboundBytes, handshakeTimeoutMs, maxSubscriptions, maxRequestsInFlight, routes, maxBodyBytes, server, partialResponse, metrics, inspector, onDrive',
    ],
  ])('refuses %j with a TypeError naming the option', async (options, message) => {
    // createServer is async: `await createServer(bad)` throws it.
    const error: unknown = await refuse(options as Partial<ServerOptions>).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TypeError);
    expect((error as TypeError).message).toBe(message);
  });

  it('accepts a non-loopback host with a token, and reports where it listens', async () => {
    const server = await createServer({ engine, host: '0.0.0.0', port: 0, token: 't' });
    expect(server.url).toBe(`ws://0.0.0.0:${server.port}`);
    expect(server.httpUrl).toBe(`http://0.0.0.0:${server.port}`);
    expect(server.port).toBeGreaterThan(0);
    await server.close();
  });

  it('accepts a non-loopback host with a verify hook', async () => {
    const server = await createServer({ engine, host: '0.0.0.0', port: 0, verify: () => undefined });
    expect(server.port).toBeGreaterThan(0);
    await server.close();
  });

  it('formats an IPv6 host in its URLs', async () => {
    const server = await createServer({ engine, host: '::1', port: 0 });
    expect(server.url).toBe(`ws://[::1]:${server.port}`);
    await server.close();
  });

  it('rejects when the port is taken', async () => {
    const taken = createNetServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as { port: number };
    await expect(createServer({ engine, port })).rejects.toThrow(/EADDRINUSE/);
    await new Promise((resolve) => taken.close(resolve));
  });

  it('knows the loopback hosts', () => {
    expect(['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1'].map(isLoopbackHost)).toEqual([true, true, true, true, true, true]);
    expect(['0.0.0.0', '10.0.0.1', 'example.com', '::', '128.0.0.1'].map(isLoopbackHost)).toEqual([false, false, false, false, false]);
  });
});
