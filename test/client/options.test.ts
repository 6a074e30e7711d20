import { afterEach, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { backoffDelay, createClient } from '../../src/server/client/index.js';
import { resolveBackoff } from '../../src/server/client/backoff.js';
import { startScriptedServer } from '../support/scripted-server.js';

describe('backoffDelay: exponential with full jitter', () => {
  const defaults = resolveBackoff();

  it('is random() times min(maxMs, baseMs * 2 ** (attempt - 1)), 500 and 30000 by default', () => {
    expect(defaults).toEqual({ baseMs: 500, maxMs: 30_000 });
    expect([1, 2, 3, 4, 7, 8, 20].map((n) => backoffDelay(n, defaults, () => 0.5))).toEqual([250, 500, 1000, 2000, 15_000, 15_000, 15_000]);
    expect(backoffDelay(3, defaults, () => 0)).toBe(0);
    expect(backoffDelay(3, defaults, () => 0.999)).toBeCloseTo(1998);
  });

  it('rejects a bad option by name', () => {
    expect(() => resolveBackoff({ baseMs: -1 })).toThrow(new RangeError('backoff.baseMs must be a finite number >= 0 (ms), got -1'));
    expect(() => resolveBackoff({ baseMs: 1000, maxMs: 10 })).toThrow(new RangeError('backoff.maxMs must be >= backoff.baseMs (1000), got 10'));
  });
});

describe('createClient options', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it('without options.WebSocket and without globalThis.WebSocket: a TypeError saying so', () => {
    vi.stubGlobal('WebSocket', undefined);
    expect(() => createClient({ url: 'ws://127.0.0.1:1' })).toThrow(TypeError);
    expect(() => createClient({ url: 'ws://127.0.0.1:1' })).toThrowErrorMatchingInlineSnapshot(
      `[TypeError: runestream client: options.WebSocket was not given and globalThis.WebSocket does not exist; in Node 20, pass \`WebSocket\` from 'ws' (import { WebSocket } from 'ws')]`,
    );
  });

  it('uses globalThis.WebSocket when options.WebSocket is not given', async () => {
    vi.stubGlobal('WebSocket', WebSocket);
    const server = await startScriptedServer();
    const client = createClient({ url: server.url });
    client.state$('c-1').subscribe();
    const peer = await server.nextPeer();
    expect(await peer.next()).toEqual({ op: 'subscribe', stream: 'c-1' });
    await client.close();
    await server.close();
  });

  it('rejects a URL that is not ws: or wss:', () => {
    expect(() => createClient({ url: 'http://localhost:7070', WebSocket })).toThrow(
      new TypeError('options.url must be a ws:// or wss:// URL, got "http://localhost:7070" (protocol http:)'),
    );
    expect(() => createClient({ url: 'localhost', WebSocket })).toThrow(new TypeError('options.url must be a ws:// or wss:// URL, got "localhost"'));
  });
});
