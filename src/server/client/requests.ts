import type { DispatchMessage, SpawnMessage } from '../protocol.js';
import { ClientError } from './errors.js';

/** A spawn or dispatch, before it is given its id. */
export type RequestBody = Omit<SpawnMessage, 'id'> | Omit<DispatchMessage, 'id'>;

interface PendingRequest {
  /** The frame to send, serialised when the request was made (so a bad payload fails the call, not the socket). */
  readonly frame: string;
  /** Whether the frame went out on the current socket: only then can a drop have lost it. */
  sent: boolean;
  readonly resolve: (result: { seq: number }) => void;
  readonly reject: (error: ClientError) => void;
}

/**
 * The client's spawns and dispatches that have not been answered yet, by id.
 *
 * Ids are 1, 2, 3, ... per client. A request made while the socket is not open waits, unsent,
 * for the next open; requests are sent in the order they were made.
 */
export class PendingRequests {
  private nextId = 1;
  private readonly pending = new Map<number, PendingRequest>();

  /**
   * Registers a request, unsent, with the next id; returns the promise of its answer. Throws
   * (registering nothing) when the body cannot be serialised as JSON.
   */
  add(body: RequestBody): Promise<{ seq: number }> {
    const id = this.nextId++;
    const frame = JSON.stringify({ ...body, id });
    let settle!: Pick<PendingRequest, 'resolve' | 'reject'>;
    const answer = new Promise<{ seq: number }>((resolve, reject) => (settle = { resolve, reject }));
    this.pending.set(id, { frame, sent: false, ...settle });
    return answer;
  }

  /** The frames not sent yet, in the order they were made; they count as sent from now on. */
  takeUnsent(): string[] {
    const frames: string[] = [];
    for (const request of this.pending.values()) {
      if (request.sent) continue;
      request.sent = true;
      frames.push(request.frame);
    }
    return frames;
  }

  /** Resolves request `id` with the seq of its ack; false when no such request is pending. */
  resolve(id: string | number, seq: number): boolean {
    const request = typeof id === 'number' ? this.pending.get(id) : undefined;
    if (request === undefined) return false;
    this.pending.delete(id as number);
    request.resolve({ seq });
    return true;
  }

  /** Rejects request `id` with the server's error; false when no such request is pending. */
  reject(id: string | number, error: ClientError): boolean {
    const request = typeof id === 'number' ? this.pending.get(id) : undefined;
    if (request === undefined) return false;
    this.pending.delete(id as number);
    request.reject(error);
    return true;
  }

  /** Rejects every request that was sent (the socket dropped: its answer cannot come); unsent ones keep waiting. */
  rejectSent(error: ClientError): void {
    for (const [id, request] of this.pending) {
      if (!request.sent) continue;
      this.pending.delete(id);
      request.reject(error);
    }
  }

  /** Rejects every pending request. */
  rejectAll(error: ClientError): void {
    for (const request of this.pending.values()) request.reject(error);
    this.pending.clear();
  }
}
