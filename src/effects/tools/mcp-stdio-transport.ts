import { StdioClientTransport, type StdioServerParameters } from '@modelcontextprotocol/sdk/client/stdio.js';
import { deserializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/**
 * The JSON-RPC error code of an answer this client refused for its size, unread (in JSON-RPC's
 * range for implementation-defined errors). Its `data` is `{ bytes, maxBytes }`.
 */
export const MCP_MESSAGE_TOO_LARGE = -32_090;

/** How much of an oversized line's start and end is kept, to find which request it answers. */
const SNIFF_BYTES = 256;
const ID = String.raw`-?\d+|"(?:[^"\\]|\\.)*"`;
/** A response's start: `{` then `jsonrpc` and `id` in any order, then `result` or `error` (the Python SDK's order). */
const RESPONSE_HEAD = new RegExp(String.raw`^\s*\{((?:\s*"(?:jsonrpc|id)"\s*:\s*(?:${ID})\s*,)*)\s*"(?:result|error)"\s*:`);
const ID_FIELD = new RegExp(String.raw`"id"\s*:\s*(${ID})`);
/** A response's end: `"id": <id>}` (the TypeScript SDK's order: `{"result":...,"jsonrpc":"2.0","id":3}`). */
const TAIL_ID = new RegExp(String.raw`"id"\s*:\s*(${ID})\s*\}\s*$`);
const NOTIFICATION_HEAD = /^\s*\{\s*"method"\s*:/;

/** A line that passed the bound: only its size and a little of each end were kept. */
interface Oversized {
  readonly bytes: number;
  readonly head: string;
  readonly tail: string;
}

/**
 * The MCP SDK's `ReadBuffer` (the stdio transport's line reader) with a bound on each message,
 * held while it is read: a line's bytes are counted as they arrive, and past `maxBytes` they are
 * dropped (keeping the first and last 256) until its newline. So a 100 MB answer costs this
 * process its count, not its copy (the SDK's own buffer concatenates the whole line, and past
 * its 10 MiB closes the connection).
 *
 * An oversized line is then:
 * 1. a response whose request it can tell (its `id`, found at the line's start or end): answered
 *    to that request as a JSON-RPC error {@link MCP_MESSAGE_TOO_LARGE}, `data: { bytes, maxBytes }`;
 *    the connection carries on;
 * 2. a notification or a server's request (`{"method": ...`): dropped, reported as the
 *    transport's error;
 * 3. anything else: a thrown error, on which the SDK closes the connection (the calls in flight
 *    fail; `connectMcp` reconnects on the next call).
 */
export class BoundedReadBuffer {
  #pieces: Buffer[] = [];
  #length = 0;
  #over: { bytes: number; head: Buffer; tail: Buffer } | undefined;
  #ready: (string | Oversized)[] = [];

  constructor(readonly maxBytes: number) {}

  append(chunk: Buffer): void {
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(10, start);
      this.#take(chunk.subarray(start, newline === -1 ? chunk.length : newline));
      if (newline === -1) return;
      this.#endLine();
      start = newline + 1;
    }
  }

  readMessage(): JSONRPCMessage | null {
    const line = this.#ready.shift();
    if (line === undefined) return null;
    if (typeof line === 'string') return deserializeMessage(line);
    const id = responseId(line);
    const reason = `an MCP message of ${line.bytes} bytes is over ${this.maxBytes} (maxResultBytes)`;
    // Left for the SDK to report as the transport's error; the connection carries on.
    if (id === undefined) throw new Error(`${reason}: a notification or request of the server, dropped`);
    return { jsonrpc: '2.0', id, error: { code: MCP_MESSAGE_TOO_LARGE, message: reason, data: { bytes: line.bytes, maxBytes: this.maxBytes } } };
  }

  clear(): void {
    this.#pieces = [];
    this.#length = 0;
    this.#over = undefined;
    this.#ready = [];
  }

  #take(piece: Buffer): void {
    if (piece.length === 0) return;
    const over = this.#over;
    if (over !== undefined) {
      over.bytes += piece.length;
      over.tail = lastBytes(Buffer.concat([over.tail, piece.subarray(Math.max(0, piece.length - SNIFF_BYTES))]));
      return;
    }
    if (this.#length + piece.length <= this.maxBytes) {
      this.#pieces.push(piece);
      this.#length += piece.length;
      return;
    }
    // At most maxBytes plus one chunk, once: from here the line is only counted.
    const whole = Buffer.concat([...this.#pieces, piece]);
    this.#over = { bytes: whole.length, head: Buffer.from(whole.subarray(0, SNIFF_BYTES)), tail: lastBytes(whole) };
    this.#pieces = [];
    this.#length = 0;
  }

  #endLine(): void {
    const over = this.#over;
    if (over === undefined) {
      this.#ready.push(Buffer.concat(this.#pieces, this.#length).toString('utf8').replace(/\r$/, ''));
      this.#pieces = [];
      this.#length = 0;
      return;
    }
    this.#over = undefined;
    const line: Oversized = { bytes: over.bytes, head: over.head.toString('utf8'), tail: over.tail.toString('utf8') };
    if (responseId(line) === undefined && !NOTIFICATION_HEAD.test(line.head)) {
      // Neither a response it can route nor a notification: the SDK closes the connection.
      throw new Error(`an MCP message of ${line.bytes} bytes is over ${this.maxBytes} (maxResultBytes), and names no request`);
    }
    this.#ready.push(line);
  }
}

/** The last {@link SNIFF_BYTES} of `bytes`, as a copy (not a view keeping a whole chunk alive). */
const lastBytes = (bytes: Buffer): Buffer => Buffer.from(bytes.subarray(Math.max(0, bytes.length - SNIFF_BYTES)));

/** The id of the request an oversized line answers, if it is a response that says so at either end. */
function responseId(line: Oversized): string | number | undefined {
  const head = RESPONSE_HEAD.exec(line.head);
  if (head === null) return undefined;
  const id = ID_FIELD.exec(head[1]!) ?? TAIL_ID.exec(line.tail.replace(/\r$/, ''));
  return id === null ? undefined : (JSON.parse(id[1]!) as string | number);
}

/**
 * The SDK's stdio client transport, its line reader swapped for {@link BoundedReadBuffer}: every
 * message the server sends is at most `maxMessageBytes`, enforced while it is read.
 */
export class BoundedStdioClientTransport extends StdioClientTransport {
  constructor(server: StdioServerParameters, maxMessageBytes: number) {
    super(server);
    const self = this as unknown as { _readBuffer?: unknown };
    // The SDK's private field: checked, so an SDK that renamed it fails here, not silently unbounded.
    if (self._readBuffer === undefined) throw new TypeError('connectMcp: this MCP SDK has no StdioClientTransport._readBuffer to bound');
    self._readBuffer = new BoundedReadBuffer(maxMessageBytes);
  }
}
