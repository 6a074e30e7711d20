import { WebSocket, type ClientOptions } from 'ws';
import { createEngine, ServerMessage, type ClientMessage, type Engine, type EngineOptions, type Rune } from '../../src/index.js';
import { createServer, type RunestreamServer, type ServerOptions } from '../../src/server/index.js';

type Match = (message: ServerMessage) => boolean;

interface Waiter {
  readonly match: Match;
  readonly from: number;
  readonly consume: boolean;
  readonly description: string;
  readonly resolve: (message: ServerMessage) => void;
  readonly reject: (error: Error) => void;
}

/**
 * A `ws` client for tests: collects every server message (each checked against the protocol's
 * `ServerMessage` schema) and lets a test await "the next message matching X". Pending waits
 * fail at once, naming what they waited for, when the socket closes.
 */
export class TestClient {
  /** Every message received, in order. */
  readonly messages: ServerMessage[] = [];
  /** Resolves with the close code and reason. */
  readonly closed: Promise<{ code: number; reason: string }>;
  private cursor = 0;
  private waiters: Waiter[] = [];
  private closeInfo: { code: number; reason: string } | undefined;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      const parsed = ServerMessage.safeParse(JSON.parse(String(data)));
      if (isBinary || !parsed.success) throw new Error(`the server sent a message outside the protocol: ${String(data).slice(0, 200)}`);
      this.messages.push(parsed.data);
      this.check();
    });
    this.closed = new Promise((resolve) =>
      ws.on('close', (code, reason) => {
        this.closeInfo = { code, reason: reason.toString() };
        for (const waiter of this.waiters) {
          waiter.reject(new Error(`closed (${code} ${reason.toString()}) while waiting for ${waiter.description}`));
        }
        this.waiters = [];
        resolve(this.closeInfo);
      }),
    );
  }

  /** Connects; rejects with the HTTP status when the upgrade is refused. */
  static connect(url: string, options: ClientOptions = {}): Promise<TestClient> {
    const ws = new WebSocket(url, options);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new TestClient(ws)));
      ws.once('unexpected-response', (_req, res) => {
        reject(Object.assign(new Error(`upgrade refused: HTTP ${res.statusCode}`), { statusCode: res.statusCode }));
        ws.terminate();
      });
      ws.once('error', reject);
    });
  }

  /** Sends a message (JSON-encoded), or a raw string or buffer as it is. */
  send(message: ClientMessage | string | Buffer | Record<string, unknown>, options: { binary?: boolean } = {}): void {
    this.ws.send(typeof message === 'string' || Buffer.isBuffer(message) ? message : JSON.stringify(message), { binary: options.binary ?? false });
  }

  /** The first message after the last one `next` returned that matches; waits for it if needed. */
  next(match: Match, description = 'a matching message'): Promise<ServerMessage> {
    return this.wait(match, this.cursor, true, description);
  }

  /** The first message received (since connecting) that matches; waits for it if needed. Does not move `next`. */
  find(match: Match, description = 'a matching message'): Promise<ServerMessage> {
    return this.wait(match, 0, false, description);
  }

  /** Waits until `condition` holds, checking it as each message arrives. */
  async until(condition: () => boolean, description = 'a condition'): Promise<void> {
    if (!condition()) await this.find(() => condition(), description);
  }

  /** Sends a request with an `id` and waits for its `ack` or `error`. */
  async request(message: Extract<ClientMessage, { id: unknown }>): Promise<ServerMessage> {
    this.send(message);
    return this.find((m) => (m.op === 'ack' || m.op === 'error') && m.id === message.id, `the answer to request ${String(message.id)}`);
  }

  /** Waits until the stream's runes (or a snapshot) reach `seq`. */
  reach(stream: string, seq: number): Promise<ServerMessage> {
    return this.find(
      (m) => (m.op === 'rune' && m.rune.stream === stream && m.rune.seq >= seq) || (m.op === 'snapshot' && m.stream === stream && m.seq >= seq),
      `stream "${stream}" to reach seq ${seq}`,
    );
  }

  /** The runes of a stream received so far. */
  runes(stream: string): Rune[] {
    return this.messages.flatMap((m) => (m.op === 'rune' && m.rune.stream === stream ? [m.rune] : []));
  }

  /** Closes and waits until closed. */
  async close(): Promise<void> {
    if (this.closeInfo === undefined) this.ws.close();
    await this.closed;
  }

  private wait(match: Match, from: number, consume: boolean, description: string): Promise<ServerMessage> {
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { match, from, consume, description, resolve, reject };
      if (this.settle(waiter)) return;
      if (this.closeInfo !== undefined) return reject(new Error(`closed (${this.closeInfo.code}) before ${description}`));
      this.waiters.push(waiter);
    });
  }

  private check(): void {
    this.waiters = this.waiters.filter((waiter) => !this.settle(waiter));
  }

  private settle(waiter: Waiter): boolean {
    const start = waiter.consume ? Math.max(waiter.from, this.cursor) : waiter.from;
    for (let i = start; i < this.messages.length; i++) {
      const message = this.messages[i]!;
      if (!waiter.match(message)) continue;
      if (waiter.consume) this.cursor = i + 1;
      waiter.resolve(message);
      return true;
    }
    return false;
  }
}

/** The seqs of some runes. */
export const seqsOf = (runes: readonly Rune[]): number[] => runes.map((r) => r.seq);

/** The numbers from `first` to `last`, inclusive. */
export const range = (first: number, last: number): number[] => Array.from({ length: Math.max(0, last - first + 1) }, (_, i) => first + i);

/** An engine and a server on 127.0.0.1, any free port; `stop()` closes both (server first). */
export async function startServer(
  options: Partial<ServerOptions> = {},
  engineOptions: EngineOptions = {},
): Promise<{ engine: Engine; server: RunestreamServer; connect: (options?: ClientOptions & { path?: string }) => Promise<TestClient>; stop: () => Promise<void> }> {
  const engine = options.engine ?? createEngine(engineOptions);
  const server = await createServer({ port: 0, ...options, engine });
  const clients: TestClient[] = [];
  return {
    engine,
    server,
    connect: async ({ path = '', ...clientOptions } = {}) => {
      const client = await TestClient.connect(server.url + path, clientOptions);
      clients.push(client);
      return client;
    },
    stop: async () => {
      for (const client of clients) client.ws.terminate();
      await server.close();
      await engine.close();
    },
  };
}
