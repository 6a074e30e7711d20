import { once } from 'node:events';
import { connect } from 'node:net';
import { VirtualTimeScheduler } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import type { Route } from '../../src/server/index.js';
import { fetchJson } from '../support/sse-client.js';
import { startServer } from '../support/ws-client.js';

let cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

const KIB = 1024;

/** Moves a virtual clock forward by `ms`, running what falls due. */
function advance(scheduler: VirtualTimeScheduler, ms: number): void {
  scheduler.maxFrames = scheduler.frame + ms;
  scheduler.schedule(() => undefined, ms);
  scheduler.flush();
}

/**
 * A route whose handler holds every request until the test releases them (or until `releaseAt`
 * requests are held: then it lets them all go); `held` is how many got in.
 */
function holdingRoute(releaseAt: number): Route & { held: number; release(): void } {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const route = {
    held: 0,
    release,
    method: 'POST',
    path: '/hold',
    handler: async (_req, res, { body }) => {
      if (++route.held >= releaseAt) release();
      await released;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, bytes: body.length }));
    },
  } satisfies Route & { held: number; release(): void };
  return route;
}

describe('server: request bodies, bounded across requests and in time', () => {
  it('answers 503 inbound_limit to the body that would put the bytes held across all connections over maxInboundBytes; the held ones carry on, and their bytes leave the budget', async () => {
    // Two 20 KiB bodies held by their handler (40 KiB of 48); a third would be 60.
    const route = holdingRoute(3);
    const h = await startServer({ heartbeatMs: 0, maxFrameBytes: 16 * KIB, maxPayloadBytes: 16 * KIB, maxInboundBytes: 48 * KIB, maxBodyBytes: 32 * KIB, routes: [route] });
    cleanup.push(h.stop);
    const url = `${h.server.httpUrl}/hold`;
    const body = 'x'.repeat(20 * KIB);
    const first = [fetchJson(url, { method: 'POST', body }), fetchJson(url, { method: 'POST', body })];
    while (route.held < 2) await new Promise((resolve) => setImmediate(resolve));

    expect(await fetchJson(url, { method: 'POST', body })).toMatchObject({
      status: 503,
      body: {
        ok: false,
        code: 'inbound_limit',
        message: 'the body of POST /hold would put the bytes held across all connections over maxInboundBytes; try again later',
      },
    });
    expect(route.held).toBe(2); // the refused request never reached its handler
    route.release();
    expect(await Promise.all(first)).toMatchObject([
      { status: 200, body: { ok: true, bytes: 20 * KIB } },
      { status: 200, body: { ok: true, bytes: 20 * KIB } },
    ]);
    // Their handlers returned: their bytes left the budget, so two more fit again.
    expect(await Promise.all([fetchJson(url, { method: 'POST', body }), fetchJson(url, { method: 'POST', body })])).toMatchObject([
      { status: 200, body: { ok: true, bytes: 20 * KIB } },
      { status: 200, body: { ok: true, bytes: 20 * KIB } },
    ]);
  });

  it('answers 408 body_timeout to a body not whole within messageTimeoutMs (virtual time) and closes the connection; other requests carry on', async () => {
    const scheduler = new VirtualTimeScheduler();
    const route = holdingRoute(1);
    const h = await startServer({ heartbeatMs: 0, scheduler, messageTimeoutMs: 5000, routes: [route] });
    cleanup.push(h.stop);
    const socket = connect(h.server.port, '127.0.0.1');
    cleanup.push(() => void socket.destroy());
    await once(socket, 'connect');
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    const ended = once(socket, 'close');
    // 10 of the 100 bytes it announces, and then nothing.
    socket.write(`POST /hold HTTP/1.1\r\nhost: 127.0.0.1:${h.server.port}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"a":"xxx"`);
    // A whole request on another connection: the server has read the first one's head by then.
    expect(await fetchJson(`${h.server.httpUrl}/healthz`)).toMatchObject({ status: 200 });
    advance(scheduler, 4999);
    expect(await fetchJson(`${h.server.httpUrl}/healthz`)).toMatchObject({ status: 200 });
    expect(answer).toBe('');
    advance(scheduler, 1);
    expect(await fetchJson(`${h.server.httpUrl}/healthz`)).toMatchObject({ status: 200 });
    socket.end(); // on a server without the deadline, this is what would end the request
    await ended;
    const [head, json] = answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 408 /);
    expect(head!.toLowerCase()).toContain('connection: close');
    expect(JSON.parse(json!)).toEqual({ ok: false, code: 'body_timeout', message: 'the body of POST /hold did not arrive whole within 5000 ms (messageTimeoutMs)' });
    expect(route.held).toBe(0);
  });
});
