import { createServer, connect, type Socket } from 'node:net';

/** A TCP proxy a test controls: how a test partitions one client from a server without touching the others. */
export interface TcpProxy {
  /** The port it listens on, on 127.0.0.1. */
  readonly port: number;
  /** Stops forwarding, both ways, on every connection, new ones included: bytes wait (a partition, not a reset). */
  hold(): void;
  /** Forwards again, the bytes that waited first. */
  release(): void;
  /** Resets every open connection (new ones are still accepted). */
  cut(): void;
  /** While on, resets each new connection at once: the target is down, not partitioned. */
  refuse(on: boolean): void;
  /** Closes the listener and every connection. */
  close(): Promise<void>;
}

/** One forwarded connection: the client's socket and its own to the target. */
interface Pair {
  readonly client: Socket;
  readonly upstream: Socket;
}

/**
 * Listens on 127.0.0.1 (a free port) and forwards each connection to `target` (by default the
 * local PostgreSQL, 127.0.0.1:5432).
 */
export async function tcpProxy(target: { readonly host?: string; readonly port?: number } = {}): Promise<TcpProxy> {
  const { host = '127.0.0.1', port = 5432 } = target;
  const pairs = new Set<Pair>();
  let held = false;
  let refusing = false;
  /** Bytes read while held, per destination socket, written on release. */
  const waiting = new Map<Socket, Buffer[]>();

  const forward = (from: Socket, to: Socket): void => {
    from.on('data', (chunk: Buffer) => {
      if (held) {
        from.pause();
        const queue = waiting.get(to) ?? [];
        queue.push(chunk);
        waiting.set(to, queue);
        return;
      }
      to.write(chunk);
    });
    from.on('end', () => to.end());
  };

  const server = createServer((client) => {
    if (refusing) return void client.resetAndDestroy();
    const upstream = connect({ host, port });
    const pair: Pair = { client, upstream };
    pairs.add(pair);
    const drop = (): void => {
      pairs.delete(pair);
      waiting.delete(client);
      waiting.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) {
      socket.on('error', drop);
      socket.on('close', drop);
      if (held) socket.pause();
    }
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('tcpProxy: the listener has no port');

  const cut = (): void => {
    for (const { client, upstream } of [...pairs]) {
      client.resetAndDestroy();
      upstream.destroy();
    }
  };
  return {
    port: address.port,
    hold() {
      held = true;
      for (const { client, upstream } of pairs) {
        client.pause();
        upstream.pause();
      }
    },
    release() {
      held = false;
      for (const [to, chunks] of [...waiting]) {
        waiting.delete(to);
        for (const chunk of chunks) to.write(chunk);
      }
      for (const { client, upstream } of pairs) {
        client.resume();
        upstream.resume();
      }
    },
    cut,
    refuse(on) {
      refusing = on;
    },
    close: () =>
      new Promise<void>((resolve) => {
        cut();
        server.close(() => resolve());
      }),
  };
}
