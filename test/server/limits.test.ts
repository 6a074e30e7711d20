import { once } from 'node:events';
import { VirtualTimeScheduler } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { SseClient } from '../support/sse-client.js';
import { startServer } from '../support/ws-client.js';

/** Moves a virtual clock forward by `ms`, running what falls due (an interval included, once per period). */
function advance(scheduler: VirtualTimeScheduler, ms: number): void {
  scheduler.maxFrames = scheduler.frame + ms;
  scheduler.schedule(() => undefined, ms);
  scheduler.flush();
}

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

describe('server: rate limit', () => {
  it("refuses dispatches past the burst with 'rate_limited', and accepts them again as the scheduler advances", async () => {
    const scheduler = new VirtualTimeScheduler();
    const h = await startServer({ scheduler, heartbeatMs: 0, dispatchRate: { perSecond: 10, burst: 3 } });
    stop = h.stop;
    await h.engine.spawn('chat', 'chat-actor');
    const c = await h.connect();
    const ping = (id: number) => c.request({ op: 'dispatch', id, stream: 'chat', event: { type: 'Ping' } });
    const answers = await Promise.all([1, 2, 3, 4, 5].map(ping));
    expect(answers.map((a) => a.op)).toEqual(['ack', 'ack', 'ack', 'error', 'error']);
    expect(answers[3]).toEqual({
      op: 'error',
      id: 4,
      stream: 'chat',
      code: 'rate_limited',
      message: 'rate limit exceeded: at most 10 spawns and dispatches per second, 3 at once, per connection (dispatchRate); retry later',
    });
    advance(scheduler, 100); // one token
    expect((await Promise.all([6, 7].map(ping))).map((a) => a.op)).toEqual(['ack', 'error']);
    advance(scheduler, 10_000); // refilled, up to the burst
    expect((await Promise.all([8, 9, 10, 11].map(ping))).map((a) => a.op)).toEqual(['ack', 'ack', 'ack', 'error']);
    // Spawns count too; the limit is per connection.
    expect(await c.request({ op: 'spawn', id: 12, stream: 'other', machine: 'chat-actor' })).toMatchObject({ code: 'rate_limited' });
    const fresh = await h.connect();
    expect(await fresh.request({ op: 'spawn', id: 13, stream: 'other', machine: 'chat-actor' })).toEqual({ op: 'ack', id: 13, seq: 1 });
  });
});

describe('server: heartbeat', () => {
  it('pings every heartbeatMs on the scheduler and terminates a client that missed its pong; SSE gets a comment line', async () => {
    const scheduler = new VirtualTimeScheduler();
    const h = await startServer({ scheduler, heartbeatMs: 1000 });
    stop = h.stop;
    await h.engine.spawn('chat', 'chat-actor');
    const alive = await h.connect();
    const mute = await h.connect({ autoPong: false });
    const sse = await SseClient.open(`${h.server.httpUrl}/streams/chat/events`);
    await sse.next((b) => b.kind === 'comment'); // the opening comment
    expect(h.server.connections).toBe(3);

    const pinged = [once(alive.ws, 'ping'), once(mute.ws, 'ping')];
    advance(scheduler, 1000);
    await Promise.all(pinged);
    expect(await sse.next((b) => b.kind === 'comment')).toEqual({ kind: 'comment', text: 'ping' });
    // The pong went out before this request, so the server has it once the answer is back.
    await alive.request({ op: 'dispatch', id: 'fence', stream: 'chat', event: { type: 'Ping' } });

    const pingedAgain = once(alive.ws, 'ping');
    advance(scheduler, 1000);
    expect((await mute.closed).code).toBe(1006); // terminated: no close frame
    await pingedAgain;
    expect(await alive.request({ op: 'dispatch', id: 'still', stream: 'chat', event: { type: 'Ping' } })).toMatchObject({ op: 'ack' });
    sse.close();
  });

  it('heartbeatMs 0 schedules nothing', async () => {
    const scheduler = new VirtualTimeScheduler();
    const h = await startServer({ scheduler, heartbeatMs: 0 });
    stop = h.stop;
    expect(scheduler.actions).toHaveLength(0);
  });
});

describe('server: close', () => {
  it('closes every client with 1001 and the listener, but not the engine', async () => {
    const h = await startServer();
    const [a, b] = [await h.connect(), await h.connect()];
    await h.server.close();
    expect((await a.closed).code).toBe(1001);
    expect((await b.closed).code).toBe(1001);
    expect(h.server.connections).toBe(0);
    expect(await h.engine.spawn('still-open', 'chat-actor')).toMatchObject({ accepted: true });
    await h.engine.close();
  });
});
