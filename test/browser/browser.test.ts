import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine, type Engine } from '../../src/index.js';
import { createServer, type RunestreamServer } from '../../src/server/index.js';
import { hasChromium, launchChromium } from '../support/chromium.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';

describe.skipIf(!hasChromium('test/browser'))('a real browser', () => {
  let browser: Browser;
  let engine: Engine;
  let server: RunestreamServer;

  beforeAll(async () => {
    browser = await launchChromium();
    engine = createEngine();
    server = await createServer({ engine, port: 0 });
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await engine?.close();
  });

  /** A page of the server's own origin (a blank page's origin is opaque, and the server refuses it). */
  const ownPage = async () => {
    const page = await browser.newPage();
    await page.goto(`${server.httpUrl}/healthz`);
    return page;
  };

  it("subscribes and dispatches with the browser's own WebSocket, and sees the state change", async () => {
    await engine.spawn('chat-1', 'chat-actor');
    const page = await ownPage();
    await page.setContent('<!doctype html><title>runestream</title><p id="state">connecting</p>');
    const seen = await page.evaluate(
      ({ url, userId }) =>
        new Promise<{ states: string[]; ack: unknown }>((resolve, reject) => {
          const socket = new WebSocket(url);
          const states: string[] = [];
          let ack: unknown;
          const show = (value: string) => {
            states.push(value);
            (globalThis as any).document.getElementById('state').textContent = value;
          };
          socket.onerror = () => reject(new Error('the socket failed'));
          socket.onopen = () => socket.send(JSON.stringify({ op: 'subscribe', stream: 'chat-1' }));
          socket.onmessage = (message) => {
            const frame = JSON.parse(message.data as string);
            if (frame.op === 'snapshot') {
              show(frame.state.value);
              socket.send(JSON.stringify({ op: 'dispatch', id: 'd1', stream: 'chat-1', event: { type: 'ProcessInteraction', userId } }));
            } else if (frame.op === 'ack') {
              ack = frame;
            } else if (frame.op === 'rune') {
              show(frame.rune.to);
            } else {
              reject(new Error(JSON.stringify(frame)));
            }
            if (ack !== undefined && states.at(-1) === 'running') resolve({ states, ack });
          };
        }),
      { url: server.url, userId },
    );
    expect(seen).toEqual({ states: ['idle', 'running'], ack: { op: 'ack', id: 'd1', seq: 2 } });
    expect(await page.textContent('#state')).toBe('running');
    await page.close();
  });

  it('runs runestream/client, bundled for the browser, against the server', async () => {
    // The client as a browser gets it: one bundle of src/server/client, no Node built-ins allowed.
    const bundle = await build({
      entryPoints: [fileURLToPath(new URL('../../src/server/client/index.ts', import.meta.url))],
      bundle: true,
      format: 'iife',
      globalName: 'runestream',
      platform: 'browser',
      write: false,
    });
    await engine.spawn('chat-2', 'chat-actor');
    const page = await ownPage();
    await page.addScriptTag({ content: bundle.outputFiles[0]!.text });
    const states = await page.evaluate(
      ({ url, userId }) =>
        new Promise<string[]>((resolve, reject) => {
          const { createClient } = (globalThis as any).runestream;
          const client = createClient({ url });
          const states: string[] = [];
          let dispatched: Promise<unknown> | undefined;
          client.state$('chat-2').subscribe({
            next: (state: { value: string }) => {
              states.push(state.value);
              dispatched ??= client.dispatch('chat-2', { type: 'ProcessInteraction', userId });
              if (state.value === 'running') dispatched!.then(() => client.close()).then(() => resolve(states), reject);
            },
            error: reject,
          });
        }),
      { url: server.url, userId },
    );
    expect(states).toEqual(['idle', 'running']);
    await page.close();
  });

  it('refuses a page of another origin: its WebSocket never opens and the stream it spawns never exists', async () => {
    // Another port of the same host is another origin: the attacker's site, as far as the browser knows.
    const attackerSite: Server = createHttpServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>a page on another site</title>');
    });
    await new Promise<void>((resolve) => attackerSite.listen(0, '127.0.0.1', resolve));
    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${(attackerSite.address() as AddressInfo).port}/`);
    const outcome = await page.evaluate(
      (url) =>
        new Promise<string>((resolve) => {
          const socket = new WebSocket(url);
          socket.onopen = () => socket.send(JSON.stringify({ op: 'spawn', id: 1, stream: 'hijacked', machine: 'chat-actor' }));
          socket.onmessage = (message) => resolve(`answered ${String(message.data)}`);
          socket.onclose = (event) => resolve(`closed ${event.code}`);
        }),
      server.url,
    );
    expect(outcome).toBe('closed 1006'); // the handshake failed: the server answered 403
    expect(await engine.snapshot('hijacked')).toBeUndefined();
    await page.close();
    await new Promise((resolve) => attackerSite.close(resolve));
  });
  it('lets a page of an allowed other origin call a route with a token and a JSON body (a CORS preflight), and a page of any other origin not', async () => {
    const site = (): Promise<Server> =>
      new Promise((resolve) => {
        const http = createHttpServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>another site</title>'));
        http.listen(0, '127.0.0.1', () => resolve(http));
      });
    const [allowed, other] = await Promise.all([site(), site()]);
    const originOf = (http: Server) => `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
    const echo = {
      method: 'POST',
      path: '/echo',
      handler: (_req: unknown, res: import('node:http').ServerResponse, { body }: { body: Buffer }) =>
        void res.writeHead(200, { 'content-type': 'application/json' }).end(body),
    };
    const cors = await createServer({ engine, port: 0, token: 's3cret', allowedOrigins: [originOf(allowed)], routes: [echo] });
    const call = async (from: Server): Promise<string> => {
      const page = await browser.newPage();
      await page.goto(`${originOf(from)}/`);
      const outcome = await page.evaluate(
        (url) =>
          fetch(url, { method: 'POST', headers: { authorization: 'Bearer s3cret', 'content-type': 'application/json' }, body: JSON.stringify({ hello: 'there' }) }).then(
            async (response) => `${response.status} ${await response.text()}`,
            (error: Error) => `failed: ${error.message}`,
          ),
        `${cors.httpUrl}/echo`,
      );
      await page.close();
      return outcome;
    };
    try {
      expect(await call(allowed)).toBe('200 {"hello":"there"}');
      expect(await call(other)).toMatch(/^failed: /); // the preflight was refused: the browser never sent the POST
    } finally {
      await cors.close();
      await Promise.all([allowed, other].map((http) => new Promise((resolve) => http.close(resolve))));
    }
  });
});
