import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { z } from 'zod';
import { ClientMessage, type ServerMessage } from '../../src/server/protocol.js';

/**
 * A queue read with `await next()`: items pushed before anyone waits are kept, in order. A pushed
 * Error makes the `next()` that reaches it reject.
 */
export class AsyncQueue<T> {
  private readonly items: Array<T | Error> = [];
  private readonly waiters: Array<{ resolve: (item: T) => void; reject: (error: Error) => void }> = [];

  push(item: T | Error): void {
    const waiter = this.waiters.shift();
    if (waiter === undefined) this.items.push(item);
    else if (item instanceof Error) waiter.reject(item);
    else waiter.resolve(item);
  }

  next(): Promise<T> {
    if (this.items.length > 0) {
      const item = this.items.shift()!;
      return item instanceof Error ? Promise.reject(item) : Promise.resolve(item);
    }
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }
}

/** One client connection to the scripted server, driven by the test. */
export interface ScriptedPeer {
  /** The request URL the client connected with (path and query, e.g. `/?token=t`). */
  readonly requestUrl: string;
  /** The next message the client sent; rejects when it sent something that is not a `ClientMessage`. */
  next(): Promise<ClientMessage>;
  /** Sends a protocol message, or any raw text / binary frame to test the client's checks. */
  send(message: ServerMessage | string | Buffer): void;
  /** Drops the connection without a close frame (like a crash or a lost network). */
  drop(): void;
  /** Resolves when the connection is closed, from either side, with the close code. */
  readonly closed: Promise<number>;
}

/** A real `ws` server on 127.0.0.1 that speaks the protocol only as the test tells it to. */
export interface ScriptedServer {
  /** `ws://127.0.0.1:<port>` */
  readonly url: string;
  /** The next connection that completed its handshake. */
  nextPeer(): Promise<ScriptedPeer>;
  /** While true, handshakes are refused with HTTP 401 (the client's socket fails and it retries). */
  refuse: boolean;
  /** Handshakes attempted, refused ones included. */
  readonly attempts: number;
  close(): Promise<void>;
}

export async function startScriptedServer(): Promise<ScriptedServer> {
  const peers = new AsyncQueue<ScriptedPeer>();
  let attempts = 0;
  const server: ScriptedServer = {
    url: '',
    nextPeer: () => peers.next(),
    refuse: false,
    get attempts() {
      return attempts;
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        for (const socket of wss.clients) socket.terminate();
        wss.close((error) => (error ? reject(error) : resolve()));
      }),
  };
  const wss = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    verifyClient: (_info, callback) => {
      attempts++;
      callback(!server.refuse, 401, 'Unauthorized');
    },
  });
  wss.on('connection', (socket, request) => peers.push(scriptedPeer(socket, request.url ?? '/')));
  await new Promise<void>((resolve, reject) => {
    wss.once('listening', resolve);
    wss.once('error', reject);
  });
  (server as { url: string }).url = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`;
  return server;
}

function scriptedPeer(socket: WebSocket, requestUrl: string): ScriptedPeer {
  const received = new AsyncQueue<ClientMessage>();
  socket.on('message', (data, isBinary) => {
    if (isBinary) return received.push(new Error('the client sent a binary frame'));
    const text = data.toString();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return received.push(new Error(`the client sent a frame that is not JSON: ${text}`));
    }
    const parsed = ClientMessage.safeParse(json);
    received.push(parsed.success ? parsed.data : new Error(`the client sent an invalid message ${text}: ${z.prettifyError(parsed.error)}`));
  });
  const closed = new Promise<number>((resolve) => socket.once('close', resolve));
  return {
    requestUrl,
    next: () => received.next(),
    send: (message) => socket.send(typeof message === 'string' || Buffer.isBuffer(message) ? message : JSON.stringify(message)),
    drop: () => socket.terminate(),
    closed,
  };
}
