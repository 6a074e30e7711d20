/**
 * The far side of the fan-out benchmark, in its own process: `clients` WebSocket clients of one
 * URL. Driven over IPC by bench/ws-fanout.ts:
 * - `{type: 'connect', url, clients, subscribe?}`: opens the clients (each sends `subscribe` for
 *   that stream and waits for its snapshot), then answers `{type: 'ready'}`.
 * - `{type: 'expect', count, latency}`: answers `{type: 'done', latencies?}` once every client has
 *   received `count` more frames; with `latency`, each frame's delay since its event's `sentAt`.
 * - `{type: 'close'}`: closes them all and exits.
 */
import { performance } from 'node:perf_hooks';
import { WebSocket } from 'ws';

type Command = { type: 'connect'; url: string; clients: number; subscribe?: string } | { type: 'expect'; count: number; latency: boolean } | { type: 'close' };

let sockets: WebSocket[] = [];
let remaining = 0; // frames still expected, summed over the clients
let latencies: number[] | undefined;

const send = (message: unknown): void => void process.send!(message);
const nowEpoch = (): number => performance.timeOrigin + performance.now();

function onFrame(data: WebSocket.RawData): void {
  if (latencies !== undefined) {
    const frame = JSON.parse(data.toString()) as { rune: { event: { sentAt: number } } };
    latencies.push(nowEpoch() - frame.rune.event.sentAt);
  }
  if (--remaining === 0) send({ type: 'done', latencies });
}

async function connect(url: string, clients: number, subscribe: string | undefined): Promise<void> {
  sockets = await Promise.all(
    Array.from(
      { length: clients },
      () =>
        new Promise<WebSocket>((resolve, reject) => {
          const socket = new WebSocket(url);
          socket.once('error', reject);
          socket.once('open', () => {
            if (subscribe === undefined) return resolve(socket);
            socket.send(JSON.stringify({ op: 'subscribe', stream: subscribe }));
            socket.once('message', () => resolve(socket)); // the snapshot
          });
        }),
    ),
  );
  for (const socket of sockets) socket.on('message', onFrame);
  send({ type: 'ready' });
}

process.on('message', (command: Command) => {
  if (command.type === 'connect') {
    connect(command.url, command.clients, command.subscribe).catch((error: unknown) => send({ type: 'error', message: String(error) }));
  } else if (command.type === 'expect') {
    latencies = command.latency ? [] : undefined;
    remaining = command.count * sockets.length;
  } else {
    for (const socket of sockets) socket.terminate();
    process.exit(0);
  }
});
