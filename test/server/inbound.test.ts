import { once } from 'node:events';
import { connect } from 'node:net';
import { VirtualTimeScheduler } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { OPCODE, RawWebSocket } from '../support/raw-ws.js';
import { startServer } from '../support/ws-client.js';

/** Moves a virtual clock forward by `ms`, running what falls due. */
function advance(scheduler: VirtualTimeScheduler, ms: number): void {
  scheduler.maxFrames = scheduler.frame + ms;
  scheduler.schedule(() => undefined, ms);
  scheduler.flush();
}

let cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

const KIB = 1024;

describe('server: unfinished messages', () => {
  it('closes a message left unfinished past messageTimeoutMs with 4002, though the client answers every ping; a completed message restarts the deadline', async () => {
    const scheduler = new VirtualTimeScheduler();
    const h = await startServer({ scheduler, heartbeatMs: 1000, messageTimeoutMs: 5000 });
    cleanup.push(h.stop);
    await h.engine.spawn('chat', 'chat-actor');
    const raw = await RawWebSocket.open(h.server.port);
    cleanup.push(() => raw.socket.destroy());

    // A whole message in two fragments, the second at t=3000: answered, and the deadline restarts.
    const dispatch = JSON.stringify({ op: 'dispatch', id: 1, stream: 'chat', event: { type: 'Ping' } });
    /** One heartbeat: the server pings, and the client's pong has been read. */
    const beat = async () => {
      const pings = raw.frames.filter((f) => f.opcode === OPCODE.ping).length;
      advance(scheduler, 1000);
      await raw.until(() => raw.frames.filter((f) => f.opcode === OPCODE.ping).length > pings, 'a heartbeat ping');
      await raw.fence();
    };
    raw.send(OPCODE.text, dispatch.slice(0, 10), false);
    await raw.fence();
    for (let i = 0; i < 3; i++) await beat();
    raw.send(OPCODE.continuation, dispatch.slice(10), true);
    await raw.until(() => raw.frames.some((f) => f.opcode === OPCODE.text), 'the ack');
    expect(JSON.parse(raw.frames.find((f) => f.opcode === OPCODE.text)!.payload.toString())).toMatchObject({ op: 'ack', id: 1 });

    // Then the first fragment of a message that never ends, while answering each heartbeat ping.
    raw.send(OPCODE.text, '{"op":"dispatch","id":2,"stream":"chat","event":{"type":"Ping","pad":"', false);
    await raw.fence();
    for (let i = 0; i < 4; i++) await beat();
    // t=7000: 4000 ms into this message, still open (a deadline from t=0 would have passed).
    expect(raw.frames.some((f) => f.opcode === OPCODE.close)).toBe(false);
    advance(scheduler, 1000);
    expect(await raw.closed).toEqual({ code: 4002, reason: 'message_timeout' });
  });

  it('closes the connection whose unfinished message would pass maxInboundBytes across all connections with 4003; the others carry on', async () => {
    const h = await startServer({ heartbeatMs: 0, maxFrameBytes: 16 * KIB, maxPayloadBytes: 40 * KIB, maxInboundBytes: 48 * KIB });
    cleanup.push(h.stop);
    await h.engine.spawn('chat', 'chat-actor');
    const bystander = await h.connect();
    const first = await RawWebSocket.open(h.server.port);
    const second = await RawWebSocket.open(h.server.port);
    cleanup.push(
      () => first.socket.destroy(),
      () => second.socket.destroy(),
    );

    first.send(OPCODE.text, 'x'.repeat(30 * KIB), false); // under its own maxPayloadBytes
    await first.fence();
    expect(await bystander.request({ op: 'dispatch', id: 'before', stream: 'chat', event: { type: 'Ping' } })).toMatchObject({ op: 'ack' });
    second.send(OPCODE.text, 'y'.repeat(30 * KIB), false); // 60 KiB in all: over 48
    expect(await second.closed).toEqual({ code: 4003, reason: 'inbound_limit' });

    // The first keeps its connection and its place; the bystander is answered.
    await first.fence();
    expect(await bystander.request({ op: 'dispatch', id: 'after', stream: 'chat', event: { type: 'Ping' } })).toMatchObject({ op: 'ack' });
    // Its bytes left the budget: a third connection may hold as much as the second tried to.
    const third = await RawWebSocket.open(h.server.port);
    cleanup.push(() => third.socket.destroy());
    third.send(OPCODE.text, 'z'.repeat(16 * KIB), false);
    await third.fence();
  });
});

describe('server: handshake deadline', () => {
  it('destroys a TCP connection that sends nothing, or half a request head, within handshakeTimeoutMs; others connect', async () => {
    const h = await startServer({ heartbeatMs: 0, handshakeTimeoutMs: 200 });
    cleanup.push(h.stop);
    const silent = connect(h.server.port, '127.0.0.1');
    const half = connect(h.server.port, '127.0.0.1');
    cleanup.push(
      () => silent.destroy(),
      () => half.destroy(),
    );
    await Promise.all([once(silent, 'connect'), once(half, 'connect')]);
    half.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n');
    const replies = [silent, half].map((socket) => {
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
      return once(socket, 'close').then(() => text);
    });
    const fresh = await h.connect();
    expect(await fresh.request({ op: 'spawn', id: 1, stream: 'chat', machine: 'chat-actor' })).toEqual({ op: 'ack', id: 1, seq: 1 });
    for (const reply of await Promise.all(replies)) expect(reply).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
  });
});
