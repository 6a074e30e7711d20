import { afterEach, describe, expect, it } from 'vitest';
import type { Authorize } from '../../src/server/index.js';
import { startServer } from '../support/ws-client.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

/** Lets every queued promise callback run (a turn of the event loop), nothing timed. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

/** An `authorize` hook whose answers the test gives, one call at a time. */
function heldHook() {
  const pending: ((answer: boolean) => void)[] = [];
  const calls: string[] = [];
  const authorize: Authorize = (_request, stream) => {
    calls.push(stream);
    return new Promise<boolean>((resolve) => pending.push(resolve));
  };
  /** Answers the oldest call, once the server has made it. */
  const answerNext = async (answer: boolean) => {
    while (pending.length === 0) await settle();
    pending.shift()!(answer);
  };
  return { authorize, calls, answerNext };
}

describe('server: per-connection limits', () => {
  it("answers a subscribe past maxSubscriptions with 'too_many_subscriptions'; unsubscribing frees a place", async () => {
    const h = await startServer({ heartbeatMs: 0, maxSubscriptions: 2 });
    stop = h.stop;
    for (const stream of ['a', 'b', 'c']) await h.engine.spawn(stream, 'chat-actor');
    const c = await h.connect();
    for (const stream of ['a', 'b', 'a', 'c']) c.send({ op: 'subscribe', stream });
    expect(await c.next((m) => m.op === 'error')).toEqual({
      op: 'error',
      stream: 'c',
      code: 'too_many_subscriptions',
      message: 'too many subscriptions: at most 2 streams per connection (maxSubscriptions); unsubscribe from one first',
    });
    expect(c.messages.filter((m) => m.op === 'snapshot').map((m) => m.op === 'snapshot' && m.stream)).toEqual(['a', 'b', 'a']);
    c.send({ op: 'unsubscribe', stream: 'a' });
    c.send({ op: 'subscribe', stream: 'c' });
    expect(await c.next((m) => m.op === 'snapshot' || m.op === 'error')).toMatchObject({ op: 'snapshot', stream: 'c' });
    // The limit is per connection.
    const other = await h.connect();
    other.send({ op: 'subscribe', stream: 'c' });
    expect(await other.next((m) => m.op === 'snapshot' || m.op === 'error')).toMatchObject({ op: 'snapshot', stream: 'c' });
  });

  it("answers a request past maxRequestsInFlight at once with 'too_many_requests', while the earlier ones wait for the hook", async () => {
    const hook = heldHook();
    const h = await startServer({ heartbeatMs: 0, maxRequestsInFlight: 3, authorize: hook.authorize });
    stop = h.stop;
    await h.engine.spawn('chat', 'chat-actor');
    const c = await h.connect();
    for (const id of [1, 2, 3, 4]) c.send({ op: 'dispatch', id, stream: 'chat', event: { type: 'Ping' } });
    c.send({ op: 'subscribe', stream: 'chat' });
    const refused = await c.next((m) => m.op === 'error');
    expect(refused).toEqual({
      op: 'error',
      id: 4,
      stream: 'chat',
      code: 'too_many_requests',
      message: 'too many requests in flight: at most 3 requests of one connection may wait for their answer (maxRequestsInFlight); wait for answers before sending more',
    });
    expect(await c.next((m) => m.op === 'error')).toMatchObject({ stream: 'chat', code: 'too_many_requests' }); // the subscribe
    expect(hook.calls).toHaveLength(1); // the first request still waits for its answer
    for (let i = 0; i < 3; i++) await hook.answerNext(true);
    const acks = await Promise.all([1, 2, 3].map((id) => c.find((m) => m.op === 'ack' && m.id === id)));
    expect(acks.map((m) => m.op === 'ack' && m.seq)).toEqual([2, 3, 4]);
    // Answered: their places are free again.
    const next = c.request({ op: 'dispatch', id: 5, stream: 'chat', event: { type: 'Ping' } });
    await hook.answerNext(true);
    expect(await next).toEqual({ op: 'ack', id: 5, seq: 5 });
  });

  it('drops the queued requests of a connection that closed: the authorize hook is not called for them', async () => {
    const hook = heldHook();
    const h = await startServer({ heartbeatMs: 0, authorize: hook.authorize });
    stop = h.stop;
    for (let i = 0; i < 50; i++) await h.engine.spawn(`s${i}`, 'chat-actor');
    const c = await h.connect();
    for (let i = 0; i < 50; i++) c.send({ op: 'subscribe', stream: `s${i}` });
    c.send({ op: 'dispatch', id: 'x', stream: 's0', event: { type: 'Ping' } });
    // The first one is waiting for the hook; the other 50 are queued behind it.
    while (hook.calls.length === 0) await settle();
    await c.close();
    while (h.server.connections > 0) await settle(); // the server saw it leave
    await hook.answerNext(true);
    for (let i = 0; i < 5; i++) await settle();
    expect(hook.calls).toEqual(['s0']);
    expect(await h.engine.snapshot('s0')).toMatchObject({ seq: 1 }); // its queued dispatch never ran
  });
});
