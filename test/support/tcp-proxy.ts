import { createServer, connect, type Socket } from 'node:net';

/** A TCP proxy a test controls: a lost connection and a network partition, on demand. */
export interface TcpProxy {
  /** The port it listens on, at 127.0.0.1. */
  readonly port: number;
  /** Destroys every live connection, both sides (a lost connection); new ones are still taken. */
  cut(): void;
  /** Stops forwarding bytes either way, keeping the connections open (a partition); new ones wait too. */
  hold(): void;
  /** Forwards again, what was held first. */
  release(): void;
  /** Destroys every connection and stops listening. */
  close(): Promise<void>;
}

/**
 * A proxy on 127.0.0.1 (a free port) to `targetPort` on 127.0.0.1 (PostgreSQL's 5432 by default).
 * While held, each side's socket is paused, so bytes wait in the kernel and nothing reaches the
 * other side until `release()`.
 */
export async function tcpProxy(targetPort = 5432): Promise<TcpProxy> {
  const pairs = new Set<[Socket, Socket]>();
  let held = false;
  const server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const drop = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const socket of pair) socket.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
    if (held) for (const socket of pair) socket.pause();
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('tcpProxy: no port');
  const eachSocket = (f: (socket: Socket) => void): void => {
    for (const pair of pairs) pair.forEach(f);
  };
  const cut = (): void => {
    eachSocket((socket) => socket.destroy());
    pairs.clear();
  };
  return {
    port: address.port,
    cut,
    hold() {
      held = true;
      eachSocket((socket) => socket.pause());
    },
    release() {
      held = false;
      eachSocket((socket) => socket.resume());
    },
    async close() {
      cut();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
