import { afterEach, describe, expect, it } from 'vitest';
import { startServer } from '../support/ws-client.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

describe('server: fairness', () => {
  it("answers a bystander's request, sent after an attacker's first error, before the attacker's last one", async () => {
    const h = await startServer({ heartbeatMs: 0 });
    stop = h.stop;
    await h.engine.spawn('chat', 'chat-actor');
    const attacker = await h.connect();
    const bystander = await h.connect();
    /** Every message both clients receive, in the order they arrive. */
    const arrivals: string[] = [];
    attacker.ws.on('message', () => arrivals.push('attacker'));
    bystander.ws.on('message', () => arrivals.push('bystander'));

    // 30 bad frames (JSON up to their last byte: each costs a full parse to refuse), small enough
    // to arrive in one read of the socket: a server that handles every message of a read at
    // once answers them all before it looks at the bystander's socket.
    const frames = 30;
    const bad = (i: number) => `{"op":"dispatch","id":${i},"stream":"chat","event":{"type":"Ping","pad":"${'a'.repeat(2000)}"`;
    for (let i = 0; i < frames; i++) attacker.send(bad(i));
    await attacker.next((m) => m.op === 'error', 'the first error');
    const answer = bystander.request({ op: 'dispatch', id: 'bystander', stream: 'chat', event: { type: 'Ping' } });
    await attacker.until(() => attacker.messages.length === frames, 'every error');
    expect(await answer).toMatchObject({ op: 'ack', id: 'bystander' });
    expect(attacker.messages.every((m) => m.op === 'error' && m.code === 'invalid_json')).toBe(true);
    // The bystander's answer came while the attacker's frames were still being refused.
    expect(arrivals.indexOf('bystander')).toBeLessThan(arrivals.lastIndexOf('attacker'));
  });
});
