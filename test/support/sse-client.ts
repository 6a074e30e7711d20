import { request, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';

/** One SSE block: an event (with its id and parsed data) or a comment line. */
export type SseBlock = { kind: 'event'; event: string; id: string | undefined; data: unknown } | { kind: 'comment'; text: string };

/** An HTTP response read to its end: status, headers and the parsed JSON body. */
export interface JsonResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: unknown;
}

/** A plain GET (or another method, with a body), the response body parsed as JSON. */
export function fetchJson(url: string, options: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {}): Promise<JsonResponse> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers: options.headers ?? {} }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text === '' ? undefined : JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/**
 * An SSE reader for tests: collects the blocks of a `text/event-stream` response and lets a
 * test await the next one matching X. Pending waits fail when the response ends.
 */
export class SseClient {
  readonly blocks: SseBlock[] = [];
  /** Resolves when the server ends the response. */
  readonly ended: Promise<void>;
  private buffer = '';
  private cursor = 0;
  private waiters: { match: (b: SseBlock) => boolean; resolve: (b: SseBlock) => void; reject: (e: Error) => void; scanned?: number }[] = [];
  private done = false;

  private constructor(readonly response: IncomingMessage) {
    response.setEncoding('utf8');
    response.on('data', (chunk: string) => this.read(chunk));
    this.ended = new Promise((resolve) =>
      response.on('close', () => {
        this.done = true;
        for (const w of this.waiters) w.reject(new Error('the SSE response ended'));
        this.waiters = [];
        resolve();
      }),
    );
  }

  /** Opens the stream; resolves once the response headers are in (status 200 or not). */
  static open(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
    return new Promise((resolve, reject) => {
      const req = request(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => resolve(new SseClient(res)));
      req.on('error', reject);
      req.end();
    });
  }

  /** The events received (comments left out). */
  get events(): Extract<SseBlock, { kind: 'event' }>[] {
    return this.blocks.filter((b): b is Extract<SseBlock, { kind: 'event' }> => b.kind === 'event');
  }

  /** The next block after the last one `next` returned that matches; waits for it if needed. */
  next(match: (block: SseBlock) => boolean): Promise<SseBlock> {
    return new Promise((resolve, reject) => {
      const waiter = { match, resolve, reject };
      if (this.settle(waiter)) return;
      if (this.done) return reject(new Error('the SSE response ended'));
      this.waiters.push(waiter);
    });
  }

  /** Aborts the request. */
  close(): void {
    this.response.destroy();
  }

  private read(chunk: string): void {
    this.buffer += chunk;
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) >= 0) {
      const lines = this.buffer.slice(0, end).split('\n');
      this.buffer = this.buffer.slice(end + 2);
      const field = (name: string) => lines.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2);
      if (lines.every((l) => l.startsWith(':'))) this.blocks.push({ kind: 'comment', text: lines.map((l) => l.slice(1).trim()).join('\n') });
      else this.blocks.push({ kind: 'event', event: field('event') ?? 'message', id: field('id'), data: JSON.parse(field('data') ?? 'null') });
    }
    this.waiters = this.waiters.filter((w) => !this.settle(w));
  }

  /** `scanned`: the blocks it has already looked at, so a long stream is not scanned again per chunk. */
  private settle(waiter: { match: (b: SseBlock) => boolean; resolve: (b: SseBlock) => void; scanned?: number }): boolean {
    for (let i = Math.max(this.cursor, waiter.scanned ?? 0); i < this.blocks.length; i++) {
      if (!waiter.match(this.blocks[i]!)) continue;
      this.cursor = i + 1;
      waiter.resolve(this.blocks[i]!);
      return true;
    }
    waiter.scanned = this.blocks.length;
    return false;
  }
}
