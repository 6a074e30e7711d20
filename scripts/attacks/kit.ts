/** What the attack scripts share: a keeping `ws` client, a server on a free port, figures and the report line. */
import { once } from 'node:events';
import { WebSocket, type ClientOptions } from 'ws';
import { createEngine, type Engine } from '../../src/index.js';
import { createServer, type RunestreamServer, type ServerOptions } from '../../src/server/index.js';

export const MiB = 1024 * 1024;
export const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';

/** A message the server sent, with its size and when it came. */
export interface Received {
  readonly message: { op: string; id?: unknown; stream?: string; code?: string; message?: string };
  readonly bytes: number;
  readonly at: number;
}

/** A `ws` client that keeps every message and lets the script wait, with a deadline, for one. */
export class Client {
  readonly received: Received[] = [];
  /** How many messages came, by error code (errors) or op (the rest): kept as they come, so counting costs nothing. */
  readonly tallies = new Map<string, number>();
  /** How many messages came. */
  answered = 0;
  readonly closed: Promise<number>;
  private listeners: (() => void)[] = [];

  /** `keep` false: only tally what comes (for floods, so the script's own memory stays out of the figures). */
  private constructor(
    readonly ws: WebSocket,
    private readonly keep: boolean,
  ) {
    ws.on('message', (data) => {
      const text = String(data);
      const message = JSON.parse(text) as Received['message'];
      this.answered++;
      if (this.keep) this.received.push({ message, bytes: Buffer.byteLength(text), at: performance.now() });
      const key = message.code ?? message.op;
      this.tallies.set(key, (this.tallies.get(key) ?? 0) + 1);
      this.notify();
    });
    ws.on('error', () => undefined);
    this.closed = new Promise((resolve) =>
      ws.on('close', (code) => {
        resolve(code);
        this.notify();
      }),
    );
  }

  static async open(url: string, options: ClientOptions = {}, keep = true): Promise<Client> {
    const ws = new WebSocket(url, { ...options, maxPayload: 1024 * MiB });
    await once(ws, 'open');
    return new Client(ws, keep);
  }

  send(message: object | string): void {
    this.ws.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** The first message matching `match`, once it has come; undefined if `ms` pass or the socket closes first. */
  async find(match: (m: Received['message']) => boolean, ms = 30_000): Promise<Received | undefined> {
    const found = () => this.received.find((r) => match(r.message));
    return (await this.until(() => found() !== undefined, ms)) ? found() : undefined;
  }

  /** Waits until `condition` holds (checked as each message comes); false after `ms` or on close. */
  async until(condition: () => boolean, ms: number): Promise<boolean> {
    const deadline = performance.now() + ms;
    while (!condition()) {
      if (this.ws.readyState === WebSocket.CLOSED || performance.now() >= deadline) return false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(0, deadline - performance.now()));
        this.listeners.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return true;
  }

  /** How many messages of this error code or op came. */
  count(key: string): number {
    return this.tallies.get(key) ?? 0;
  }

  private notify(): void {
    const listeners = this.listeners;
    this.listeners = [];
    for (const listener of listeners) listener();
  }
}

/** A memory engine (unless given one) and a server on a free port; `stop` closes both. */
export async function serve(options: Partial<ServerOptions> = {}, engine: Engine = createEngine()) {
  const server: RunestreamServer = await createServer({ engine, port: 0, heartbeatMs: 0, ...options });
  const stop = async () => {
    await server.close();
    await engine.close();
  };
  return { engine, server, stop };
}

export const turn = () => new Promise((resolve) => setImmediate(resolve));
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
export const ms = (value: number) => `${Math.round(value)} ms`;
export const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;
export const signed = (bytes: number) => `${bytes >= 0 ? '+' : '-'}${mib(Math.abs(bytes))}`;
export const tally = (values: readonly (string | number)[]) => {
  const counts = new Map<string | number, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts].map(([v, n]) => `${n} x ${v}`).join(', ') || 'none';
};
const gc = (globalThis as { gc?: () => void }).gc;
/** The process's RSS, after a full GC when node runs with --expose-gc. */
export const rss = async () => {
  for (let i = 0; i < 3; i++) {
    gc?.();
    await turn();
  }
  return process.memoryUsage().rss;
};

/** The JS heap and Buffers in use, after a full GC when node runs with --expose-gc (RSS keeps what earlier attacks took). */
export const heap = async () => {
  await rss();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
};

/** What {@link pipelinedBeside} measured: the bystander's ack, how long it took, and how many attacker answers came before it. */
export interface Beside {
  readonly ack: Received | undefined;
  readonly ackMs: number | undefined;
  readonly attackerAnswersBefore: number;
}

/**
 * Four connections each pipeline ten `frame(i)`; once the first answer comes, a bystander dispatches
 * a Ping to `bystanderStream` (a chat actor): how long its ack takes with them in the queue. Every
 * connection is closed before it returns.
 */
export async function pipelinedBeside(url: string, frame: (id: number) => string, bystanderStream: string): Promise<Beside> {
  const attackers = await Promise.all([0, 1, 2, 3].map(() => Client.open(url)));
  const bystander = await Client.open(url);
  for (const a of attackers) for (let i = 0; i < 10; i++) a.send(frame(i));
  await Promise.race(attackers.map((a) => a.find((m) => m.op === 'error')));
  const sent = performance.now();
  bystander.send({ op: 'dispatch', id: 'b', stream: bystanderStream, event: { type: 'Ping' } });
  const ack = await bystander.find((m) => m.id === 'b');
  const attackerAnswersBefore = attackers.reduce((n, a) => n + a.received.filter((r) => ack !== undefined && r.at <= ack.at).length, 0);
  await Promise.all(attackers.map((a) => a.until(() => a.received.length === 10, 60_000)));
  for (const c of [...attackers, bystander]) c.ws.close();
  return { ack, ackMs: ack === undefined ? undefined : ack.at - sent, attackerAnswersBefore };
}

/** Samples RSS every 20 ms until stopped; returns the peak. */
export function peakRss(): () => number {
  let peak = process.memoryUsage().rss;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
  return () => {
    clearInterval(timer);
    return peak;
  };
}

/** One attack's line: the figure the issue measured on main before its fixes, and the figure now. */
export function report(name: string, before: string, now: string, issue = 10): void {
  const label = `before (issue ${issue}):`;
  console.log(`${name}\n  ${label} ${before}\n  ${'now:'.padEnd(label.length)} ${now}`);
}
