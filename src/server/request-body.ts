import type { IncomingMessage } from 'node:http';
import type { SchedulerLike } from 'rxjs';
import type { InboundBudget } from './inbound-guard.js';

/** What bounds the reading of request bodies: the WebSocket's budget and deadline for unfinished messages, shared. */
export interface BodyLimits {
  /** One body's bytes: past it, `'too_large'`. */
  readonly maxBodyBytes: number;
  /** The bytes held across all connections (`maxInboundBytes`), WebSocket messages and request bodies alike. */
  readonly budget: InboundBudget;
  /** How long a body may take to arrive, from its handler's turn (`messageTimeoutMs`), on `scheduler`. */
  readonly timeoutMs: number;
  readonly scheduler: SchedulerLike;
}

/** A body read whole, holding its bytes against the budget until `release()` (once its handler is done with it). */
export interface ReadBody {
  readonly body: Buffer;
  release(): void;
}

/** Why a body was not read: over `maxBodyBytes`, over the shared budget, past the deadline, or the client left. */
export type BodyRefusal = 'too_large' | 'inbound_limit' | 'timeout' | 'aborted';

/**
 * Reads a request's whole body, each chunk counted against the budget as it arrives:
 *
 * 1. A `Content-Length`, or a running total, past `maxBodyBytes` is `'too_large'`.
 * 2. A chunk that would put the bytes held across all connections over the budget is
 *    `'inbound_limit'`: this body's bytes leave the budget, the others carry on.
 * 3. A body not whole within `timeoutMs` is `'timeout'` (without it, Node holds one for its
 *    `requestTimeout`, 300 s).
 *
 * On a refusal the rest of the body is read and dropped (until the caller's `connection:
 * close` answer ends the socket), so nothing more is held.
 */
export function readBody(req: IncomingMessage, limits: BodyLimits): Promise<ReadBody | BodyRefusal> {
  const { maxBodyBytes, budget, timeoutMs, scheduler } = limits;
  if (Number(req.headers['content-length']) > maxBodyBytes) {
    req.resume();
    return Promise.resolve('too_large');
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let held = 0;
    let settled = false;
    const release = (): void => {
      budget.update(held, 0);
      held = 0;
    };
    const settle = (outcome: ReadBody | BodyRefusal): void => {
      if (settled) return;
      settled = true;
      deadline.unsubscribe();
      req.off('data', onData);
      if (typeof outcome === 'string') {
        release();
        chunks.length = 0;
        req.resume();
      }
      resolve(outcome);
    };
    const onData = (chunk: Buffer): void => {
      if (held + chunk.length > maxBodyBytes) return settle('too_large');
      if (!budget.update(held, held + chunk.length)) {
        held = 0; // the budget dropped this body's share as it refused
        return settle('inbound_limit');
      }
      held += chunk.length;
      chunks.push(chunk);
    };
    const whole = (): void => settle({ body: Buffer.concat(chunks, held), release });
    const deadline = scheduler.schedule(() => settle('timeout'), timeoutMs);
    req.on('data', onData);
    req.once('end', whole);
    req.once('close', () => (req.complete ? whole() : settle('aborted')));
    req.once('error', () => settle('aborted'));
  });
}
