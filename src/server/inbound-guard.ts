import type { SchedulerLike, Subscription } from 'rxjs';
import type { Duplex } from 'node:stream';
import { WebSocket } from 'ws';
import { CLOSE_CODES } from './protocol.js';
import { heldInbound } from './ws-inbound.js';

/** The bytes of unfinished messages held across all connections, against `maxInboundBytes`. */
export class InboundBudget {
  private total = 0;

  constructor(private readonly maxBytes: number) {}

  /** Moves a connection's share from `before` to `after` bytes; false if the total would pass the bound. */
  update(before: number, after: number): boolean {
    const next = this.total - before + after;
    if (next > this.maxBytes) {
      this.total -= before;
      return false;
    }
    this.total = next;
    return true;
  }
}

/**
 * Watches one WebSocket's unfinished inbound message, sampled after each socket `data` event and
 * each message:
 *
 * 1. A message started and not finished within `messageTimeoutMs` (on `scheduler`) closes the
 *    connection with 4002 `message_timeout`. Only a completed message restarts the deadline:
 *    answering pings does not. While the server has paused reading the connection, the
 *    deadline starts over instead.
 * 2. Data that would put the bytes held across all connections over the budget closes this
 *    connection with 4003 `inbound_limit`.
 *
 * Once it has closed the connection for either, its bytes leave the budget, and any data but
 * the closing handshake ends the socket.
 */
export class InboundGuard {
  private held = 0;
  private deadline: Subscription | undefined;
  private closedByLimit = false;

  constructor(
    private readonly ws: WebSocket,
    socket: Duplex,
    private readonly budget: InboundBudget,
    private readonly messageTimeoutMs: number,
    private readonly scheduler: SchedulerLike,
  ) {
    // Added after ws's own listener: it sees what the receiver kept of this chunk.
    socket.on('data', () => this.sample());
    ws.on('message', () => {
      this.disarm(); // a message completed: the next one gets a fresh deadline
      this.sample();
    });
    ws.once('close', () => this.release());
  }

  private sample(): void {
    if (this.closedByLimit) {
      if (this.ws.readyState !== WebSocket.CLOSED) this.ws.terminate();
      return;
    }
    const { bytes, started } = heldInbound(this.ws);
    if (!this.budget.update(this.held, bytes)) {
      this.held = 0;
      return this.closeFor(CLOSE_CODES.inboundLimit, 'inbound_limit');
    }
    this.held = bytes;
    if (!started) this.disarm();
    else this.deadline ??= this.scheduler.schedule(() => this.expire(), this.messageTimeoutMs);
  }

  private expire(): void {
    this.deadline = undefined;
    // The server itself stopped reading it (a slow client, 'coalesce'): not the client's delay.
    if (this.ws.isPaused) return this.sample();
    this.closeFor(CLOSE_CODES.messageTimeout, 'message_timeout');
  }

  private closeFor(code: number, reason: string): void {
    this.release();
    this.closedByLimit = true;
    this.ws.close(code, reason);
  }

  private disarm(): void {
    this.deadline?.unsubscribe();
    this.deadline = undefined;
  }

  private release(): void {
    this.disarm();
    this.budget.update(this.held, 0);
    this.held = 0;
  }
}
