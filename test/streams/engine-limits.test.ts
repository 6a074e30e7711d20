import { describe, expect, it } from 'vitest';
import type { Rune } from '../../src/index.js';
import { createEngine } from '../../src/streams/engine.js';
import { memoryStore } from '../../src/streams/memory-store.js';

/** `{a: {a: ... {a: 1}}}`, `levels` objects deep. */
const nested = (levels: number): unknown => {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
};

const toolCall = (args: unknown) => ({ callId: 'call-1', toolName: 'search', arguments: args });

describe('engine: limits on spawn inputs and events', () => {
  it('refuses a spawn input nested 1,000 levels deep with too_deep, before its schema, storing nothing', async () => {
    const store = memoryStore();
    const engine = createEngine({ store });
    expect(await engine.spawn('call-1', 'tool-call', toolCall(nested(1_000)))).toEqual({
      accepted: false,
      code: 'too_deep',
      reason: 'input.arguments.a.a.a.….a.a.a: nested deeper than 64 levels (limits.maxDepth)',
    });
    expect(await store.head('call-1')).toBeUndefined();
    expect(await engine.snapshot('call-1')).toBeUndefined();
    // At the limit it is a valid spawn: the input is 1 level, arguments 2, so 62 more.
    expect(await engine.spawn('call-1', 'tool-call', toolCall(nested(62)))).toMatchObject({ accepted: true });
    await engine.close();
  });

  it('refuses an event over a limit with the limit code, appending nothing, and the stream carries on', async () => {
    const store = memoryStore();
    const engine = createEngine({ store, limits: { maxArrayLength: 3, maxStringLength: 20, maxKeys: 4 } });
    await engine.spawn('conv/c/agent/a/turn', 'turn-engine');
    await engine.dispatch('conv/c/agent/a/turn', { type: 'start_turn', input: 'hi' });
    expect(await engine.dispatch('conv/c/agent/a/turn', { type: 'tool_calls_received', callIds: ['a', 'b', 'c', 'd'] })).toEqual({
      accepted: false,
      code: 'array_too_long',
      reason: 'event.callIds: an array of 4 elements is over 3 (limits.maxArrayLength)',
    });
    expect(await engine.dispatch('conv/c/agent/a/turn', { type: 'assistant_delta', content: 'a delta far too long for this' })).toEqual({
      accepted: false,
      code: 'string_too_long',
      reason: 'event.content: a string of 29 characters is over 20 (limits.maxStringLength)',
    });
    expect(await engine.dispatch('conv/c/agent/a/turn', { type: 'steer', input: 'x', a: 1, b: 2, c: 3 })).toEqual({
      accepted: false,
      code: 'too_many_keys',
      reason: 'event: more than 4 keys (limits.maxKeys)',
    });
    expect((await store.read('conv/c/agent/a/turn')).map((r: Rune) => r.kind)).toEqual(['spawned', 'turn.started']);
    expect(await engine.dispatch('conv/c/agent/a/turn', { type: 'tool_calls_received', callIds: ['a', 'b', 'c'] })).toMatchObject({ accepted: true, rune: { seq: 3 } });
    await engine.close();
  });

  it('refuses a __proto__ key (which zod would drop silently): invalid_event for events, invalid_input for inputs', async () => {
    const store = memoryStore();
    const engine = createEngine({ store });
    expect(await engine.spawn('call-1', 'tool-call', JSON.parse('{"callId":"c","toolName":"t","arguments":{"__proto__":{"x":1}}}'))).toEqual({
      accepted: false,
      code: 'invalid_input',
      reason: 'input.arguments: the key "__proto__" is not allowed',
    });
    await engine.spawn('chat-1', 'chat-actor');
    expect(await engine.dispatch('chat-1', JSON.parse('{"type":"Pause","reason":"lunch","__proto__":{"reason":"x"}}'))).toEqual({
      accepted: false,
      code: 'invalid_event',
      reason: 'event: the key "__proto__" is not allowed',
    });
    expect(await store.head('chat-1')).toMatchObject({ seq: 1 });
    expect(await store.head('call-1')).toBeUndefined();
    await engine.close();
  });

  it('with every limit Infinity, checks no limit before the schema (only the strings no store keeps)', async () => {
    const input = toolCall(nested(100));
    const unlimited = createEngine({ limits: { maxDepth: Infinity, maxStringLength: Infinity, maxKeys: Infinity, maxArrayLength: Infinity } });
    const limited = createEngine({ limits: { maxStringLength: Infinity, maxKeys: Infinity, maxArrayLength: Infinity } });
    expect(await unlimited.spawn('call-1', 'tool-call', input)).toMatchObject({ accepted: true });
    expect(await limited.spawn('call-1', 'tool-call', input)).toMatchObject({ accepted: false, code: 'too_deep' });
    await Promise.all([unlimited.close(), limited.close()]);
  });

  it('describes an event of 10,000 wrong elements in a bounded reason, checked up to its first; a small one counts them all', async () => {
    const engine = createEngine();
    await engine.spawn('conv/c/agent/a/turn', 'turn-engine');
    const result = await engine.dispatch('conv/c/agent/a/turn', { type: 'tool_calls_received', callIds: Array.from({ length: 10_000 }, (_, i) => i) });
    expect(result).toMatchObject({ accepted: false, code: 'invalid_event' });
    const { reason } = result as { reason: string };
    expect(reason.length).toBeLessThan(2_000);
    expect(reason).toMatch(/^invalid "tool_calls_received" event: callIds\.0: Invalid input: expected string, received number; maybe more \(a value of over 256 parts/);
    // A small one is checked whole: every issue counted.
    const small = await engine.dispatch('conv/c/agent/a/turn', { type: 'tool_calls_received', callIds: Array.from({ length: 100 }, (_, i) => i) });
    expect((small as { reason: string }).reason).toMatch(/^invalid "tool_calls_received" event: callIds\.0: .*; and 95 more issues$/);
    await engine.close();
  });

  it('cuts an unknown event type of 100,000 characters to 40 in its reason', async () => {
    const engine = createEngine();
    await engine.spawn('chat-1', 'chat-actor');
    const result = await engine.dispatch('chat-1', { type: 'x'.repeat(100_000) });
    expect(result).toMatchObject({
      accepted: false,
      code: 'unknown_event',
      reason: expect.stringContaining(`unknown event type "${'x'.repeat(39)}…" for machine "chat-actor"`),
    });
    expect((result as { reason: string }).reason.length).toBeLessThan(500);
    await engine.close();
  });

  it('checks the limits option the ws way: a TypeError naming it', () => {
    expect(() => createEngine({ limits: { maxDepth: 0 } })).toThrow(new TypeError('createEngine: "limits.maxDepth" must be a positive integer or Infinity, got 0'));
    expect(() => createEngine({ limits: { maxKeys: 1.5 } })).toThrow(new TypeError('createEngine: "limits.maxKeys" must be a positive integer or Infinity, got 1.5'));
    expect(() => createEngine({ limits: { maxDepht: 3 } as never })).toThrow(
      new TypeError('createEngine: unknown limit "limits.maxDepht"; the limits are maxDepth, maxStringLength, maxKeys, maxArrayLength'),
    );
    expect(() => createEngine({ limits: 64 as never })).toThrow(new TypeError('createEngine: "limits" must be an object, got 64'));
  });
});

describe('engine: untrusted machine and stream ids', () => {
  it.each(['constructor', '__proto__', 'toString', 'hasOwnProperty'])('spawning machine "%s" answers unknown_machine', async (name) => {
    const engine = createEngine();
    expect(await engine.spawn('s', name)).toMatchObject({ accepted: false, code: 'unknown_machine', reason: expect.stringContaining(`unknown machine "${name}"`) });
    await engine.close();
  });

  it('a stored stream whose machine is named "constructor" hydrates as unknown_machine, not a TypeError', async () => {
    const store = memoryStore();
    await store.append([{ stream: 'odd', seq: 1, machine: 'constructor', kind: 'spawned', event: { type: 'spawn' }, at: 0 }]);
    const engine = createEngine({ store });
    expect(await engine.dispatch('odd', { type: 'Ping' })).toMatchObject({ accepted: false, code: 'unknown_machine' });
    await engine.close();
  });

  it('refuses an empty or ill-formed stream id with invalid_stream, storing nothing; a well-formed astral id is fine', async () => {
    const store = memoryStore();
    const engine = createEngine({ store });
    expect(await engine.spawn('', 'chat-actor')).toEqual({ accepted: false, code: 'invalid_stream', reason: 'a stream id must be a non-empty string, got ""' });
    for (const id of ['\ud800', 'chat-\udc00-1', 'chat-\u0000-1']) {
      const refused = {
        accepted: false,
        code: 'invalid_stream',
        reason: 'a stream id must have no NUL character (\\u0000) and no lone surrogate: no store keeps this one as it is',
      };
      expect(await engine.spawn(id, 'chat-actor')).toEqual(refused);
      expect(await engine.dispatch(id, { type: 'Ping' })).toEqual(refused);
    }
    for (const id of ['', '\ud800', 'chat-\udc00-1', 'chat-\ufffd-1']) expect(await store.head(id)).toBeUndefined();
    expect(await engine.spawn('chat-\u{1F642}', 'chat-actor')).toMatchObject({ accepted: true });
    // A dispatch to an empty id is refused as such; one to a well-formed id never spawned is unknown_stream.
    expect(await engine.dispatch('', { type: 'Ping' })).toMatchObject({ accepted: false, code: 'invalid_stream' });
    expect(await engine.dispatch('chat-\ufffd-1', { type: 'Ping' })).toMatchObject({ accepted: false, code: 'unknown_stream' });
    await engine.close();
  });
});
