import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';

/** A frame the server sent. */
export interface RawFrame {
  readonly fin: boolean;
  readonly opcode: number;
  readonly payload: Buffer;
}

export const OPCODE = { continuation: 0, text: 1, close: 8, ping: 9, pong: 10 } as const;

/** One client frame: masked, as RFC 6455 requires of a client. */
export function clientFrame(opcode: number, payload: Buffer | string, fin = true): Buffer {
  const data = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const length = data.length;
  const header = length < 126 ? Buffer.alloc(2) : length < 65_536 ? Buffer.alloc(4) : Buffer.alloc(10);
  header[0] = (fin ? 0x80 : 0) | opcode;
  if (length < 126) header[1] = 0x80 | length;
  else if (length < 65_536) {
    header[1] = 0x80 | 126;
    header.writeUInt16BE(length, 2);
  } else {
    header[1] = 0x80 | 127;
    header.writeBigUInt64BE(BigInt(length), 2);
  }
  const mask = randomBytes(4);
  const masked = Buffer.alloc(length);
  for (let i = 0; i < length; i++) masked[i] = data[i]! ^ mask[i % 4]!;
  return Buffer.concat([header, mask, masked]);
}

/**
 * A WebSocket client written by hand on a `net` socket, for what a `ws` client will not do: send
 * half a message (FIN=0) and leave it unfinished. It answers pings and a close frame, and
 * collects every frame the server sends.
 */
export class RawWebSocket {
  readonly frames: RawFrame[] = [];
  /** Resolves with the close frame's code and reason (or 1006 when the socket ends without one). */
  readonly closed: Promise<{ code: number; reason: string }>;
  private buffer = Buffer.alloc(0);
  private listeners: (() => void)[] = [];

  private constructor(
    readonly socket: Socket,
    rest: Buffer,
  ) {
    this.closed = new Promise((resolve) => {
      socket.on('close', () => {
        const close = this.frames.find((f) => f.opcode === OPCODE.close);
        resolve(close === undefined ? { code: 1006, reason: '' } : { code: close.payload.readUInt16BE(0), reason: close.payload.subarray(2).toString() });
        this.notify();
      });
    });
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('error', () => undefined);
    if (rest.length > 0) this.read(rest);
  }

  /** Connects and completes the opening handshake by hand. */
  static async open(port: number): Promise<RawWebSocket> {
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    const key = randomBytes(16).toString('base64');
    socket.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    let head = Buffer.alloc(0);
    while (!head.includes('\r\n\r\n')) {
      const [chunk] = (await once(socket, 'data')) as [Buffer];
      head = Buffer.concat([head, chunk]);
    }
    const end = head.indexOf('\r\n\r\n') + 4;
    if (!head.subarray(0, end).toString().startsWith('HTTP/1.1 101')) throw new Error(`upgrade refused: ${head.toString().split('\r\n')[0]}`);
    socket.pause();
    const client = new RawWebSocket(socket, head.subarray(end));
    socket.resume();
    return client;
  }

  /** Sends one frame. */
  send(opcode: number, payload: Buffer | string, fin = true): void {
    this.socket.write(clientFrame(opcode, payload, fin));
  }

  /**
   * Sends a ping and waits for its pong: the server has then read everything sent before it
   * (control frames may come between the fragments of an unfinished message).
   */
  async fence(): Promise<void> {
    const token = randomBytes(8);
    this.send(OPCODE.ping, token);
    await this.until(() => this.frames.some((f) => f.opcode === OPCODE.pong && f.payload.equals(token)), 'the pong of a fence');
  }

  /** Waits until `condition` holds, checked as each frame arrives; fails if the socket closes first. */
  async until(condition: () => boolean, description: string): Promise<void> {
    while (!condition()) {
      if (this.socket.destroyed) throw new Error(`closed while waiting for ${description}`);
      await new Promise<void>((resolve) => this.listeners.push(resolve));
    }
  }

  private read(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    for (;;) {
      if (this.buffer.length < 2) break;
      const fin = (this.buffer[0]! & 0x80) !== 0;
      const opcode = this.buffer[0]! & 0x0f;
      let length = this.buffer[1]! & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (this.buffer.length < 4) break;
        length = this.buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (this.buffer.length < 10) break;
        length = Number(this.buffer.readBigUInt64BE(2));
        offset = 10;
      }
      if (this.buffer.length < offset + length) break;
      const payload = this.buffer.subarray(offset, offset + length);
      this.buffer = this.buffer.subarray(offset + length);
      this.frames.push({ fin, opcode, payload });
      if (opcode === OPCODE.ping && !this.socket.destroyed) this.send(OPCODE.pong, payload);
      if (opcode === OPCODE.close && !this.socket.destroyed) this.socket.end(clientFrame(OPCODE.close, payload)); // the closing handshake
    }
    this.notify();
  }

  private notify(): void {
    const listeners = this.listeners;
    this.listeners = [];
    for (const listener of listeners) listener();
  }
}
