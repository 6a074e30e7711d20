import { afterEach, describe, expect, it } from 'vitest';
import { memoryStore } from '../../src/index.js';
import { startServer } from '../support/ws-client.js';

/** `{a: {a: ... {a: 1}}}`, `levels` objects deep. */
const nested = (levels: number): unknown => {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
};

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

describe('server: input limits and untrusted names', () => {
  it('refuses a tool-call spawned with arguments nested 1,000 levels deep with too_deep, and stores nothing', async () => {
    const store = memoryStore();
    const h = await startServer({}, { store });
    stop = h.stop;
    const client = await h.connect();
    const input = { callId: 'call-1', toolName: 'search', arguments: nested(1_000) };
    expect(await client.request({ op: 'spawn', id: 1, stream: 'call-1', machine: 'tool-call', input })).toEqual({
      op: 'error',
      id: 1,
      stream: 'call-1',
      code: 'too_deep',
      message: 'input.arguments.a.a.a.….a.a.a: nested deeper than 64 levels (limits.maxDepth)',
    });
    expect(await h.engine.snapshot('call-1')).toBeUndefined();
    expect(await store.head('call-1')).toBeUndefined();
  });

  it('answers an event of 10,000 wrong elements with a bounded invalid_event, checked up to the first; and a bystander dispatch is acked', async () => {
    const h = await startServer();
    stop = h.stop;
    await h.engine.spawn('conv/c/agent/a/turn', 'turn-engine');
    await h.engine.dispatch('conv/c/agent/a/turn', { type: 'start_turn', input: 'hi' });
    await h.engine.spawn('chat', 'chat-actor');
    const [attacker, bystander] = [await h.connect(), await h.connect()];
    const event = { type: 'tool_calls_received', callIds: Array.from({ length: 10_000 }, (_, i) => i) };
    const answer = attacker.request({ op: 'dispatch', id: 'big', stream: 'conv/c/agent/a/turn', event });
    const bystanderAnswer = bystander.request({ op: 'dispatch', id: 'ping', stream: 'chat', event: { type: 'Ping' } });

    const error = await answer;
    expect(error).toMatchObject({ op: 'error', id: 'big', stream: 'conv/c/agent/a/turn', code: 'invalid_event' });
    expect(Buffer.byteLength(JSON.stringify(error))).toBeLessThan(2_048);
    // Checked up to the first wrong element: the rest are neither described nor counted.
    expect(error.op === 'error' && error.message).toMatch(/^invalid "tool_calls_received" event: callIds\.0: [^;]*; maybe more \(a value of over 256 parts/);
    expect(await bystanderAnswer).toMatchObject({ op: 'ack', id: 'ping', seq: 2 });
    expect(await h.engine.snapshot('conv/c/agent/a/turn')).toMatchObject({ seq: 2 });
  });

  it('answers an event with a __proto__ key (as JSON.parse keeps it) with invalid_event, appending nothing', async () => {
    const store = memoryStore();
    const h = await startServer({}, { store });
    stop = h.stop;
    await h.engine.spawn('chat', 'chat-actor');
    const client = await h.connect();
    client.send('{"op":"dispatch","id":"proto","stream":"chat","event":{"type":"Pause","__proto__":{"reason":"x"}}}');
    expect(await client.next((m) => (m.op === 'error' || m.op === 'ack') && m.id === 'proto', 'the answer to the dispatch')).toEqual({
      op: 'error',
      id: 'proto',
      stream: 'chat',
      code: 'invalid_event',
      message: 'event: the key "__proto__" is not allowed',
    });
    expect(await store.head('chat')).toMatchObject({ seq: 1 });
  });

  it('answers machine "constructor" and "__proto__" with unknown_machine, not internal', async () => {
    const h = await startServer();
    stop = h.stop;
    const client = await h.connect();
    for (const machine of ['constructor', '__proto__', 'toString']) {
      expect(await client.request({ op: 'spawn', id: machine, stream: `s-${machine}`, machine })).toMatchObject({
        op: 'error',
        id: machine,
        code: 'unknown_machine',
      });
    }
  });

  it('answers a stream id with a lone surrogate with invalid_message naming stream, and stores nothing', async () => {
    const store = memoryStore();
    const h = await startServer({}, { store });
    stop = h.stop;
    const client = await h.connect();
    // Raw text: JSON.stringify would escape the surrogate the same way, but this is what a client sends.
    client.send('{"op":"spawn","id":"lone","stream":"chat-\\ud800","machine":"chat-actor"}');
    const error = await client.next((m) => (m.op === 'error' || m.op === 'ack') && m.id === 'lone', 'the answer to the spawn');
    expect(error).toEqual({
      op: 'error',
      id: 'lone',
      code: 'invalid_message',
      message: 'invalid "spawn" message: stream: must have no NUL character (\\u0000) and no lone surrogate',
    });
    expect(await store.head('chat-\ud800')).toBeUndefined();
    expect(await h.engine.snapshot('chat-\ud800')).toBeUndefined();
    // The connection carries on.
    expect(await client.request({ op: 'spawn', id: 'ok', stream: 'chat-\u{1F642}', machine: 'chat-actor' })).toMatchObject({ op: 'ack', seq: 1 });
  });
});
