import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { memoryStore, type ProtocolErrorCode, type Rune, type RuneStore } from '../../src/index.js';
import { range, seqsOf, startServer } from '../support/ws-client.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const interact = { type: 'ProcessInteraction', userId } as const;
const complete = { type: 'InteractionComplete', success: true } as const;

/** One bad frame and the one error it must get: its code, and the id / stream it must echo. */
interface BadFrame {
  readonly data: string | Buffer;
  readonly binary?: boolean;
  readonly code: ProtocolErrorCode;
  readonly id?: string;
  readonly stream?: string;
}

const MAX_FRAME = 2048;
const json = (value: unknown): string => JSON.stringify(value);
const notJson = fc
  .string({ maxLength: 40 })
  .map((s) => `{${s}`)
  .filter((s) => {
    try {
      JSON.parse(s);
      return false;
    } catch {
      return true;
    }
  });

/** Bad frames of every kind; `i` makes each request id and unknown stream unique. */
const badFrame = (i: number): fc.Arbitrary<BadFrame> => {
  const id = `f${i}`;
  return fc.oneof(
    notJson.map((data) => ({ data, code: 'invalid_json' as const })),
    fc.oneof(fc.integer(), fc.string({ maxLength: 10 }), fc.constant(null), fc.array(fc.integer(), { maxLength: 3 })).map((v) => ({
      data: json(v),
      code: 'invalid_message' as const,
    })),
    fc.constant({ data: json({ id, stream: 'idle-chat' }), code: 'invalid_message' as const, id, stream: 'idle-chat' }),
    fc.oneof(fc.integer(), fc.boolean(), fc.constant(null)).map((op) => ({ data: json({ op, id }), code: 'invalid_message' as const, id })),
    fc
      .string({ minLength: 1, maxLength: 12 })
      .filter((op) => !['spawn', 'dispatch', 'subscribe', 'unsubscribe'].includes(op))
      .map((op) => ({ data: json({ op, id }), code: 'unknown_op' as const, id })),
    // wrong types, missing and extra fields
    fc.constantFrom(
      { data: json({ op: 'dispatch', id, stream: 7, event: interact }), code: 'invalid_message' as const, id },
      { data: json({ op: 'dispatch', id, stream: 'idle-chat', event: 'Ping' }), code: 'invalid_message' as const, id, stream: 'idle-chat' },
      { data: json({ op: 'dispatch', id, stream: 'idle-chat' }), code: 'invalid_message' as const, id, stream: 'idle-chat' },
      { data: json({ op: 'dispatch', id: { no: 1 }, stream: 'idle-chat', event: interact }), code: 'invalid_message' as const, stream: 'idle-chat' },
      { data: json({ op: 'spawn', id, stream: '', machine: 'chat-actor' }), code: 'invalid_message' as const, id },
      { data: json({ op: 'spawn', id, stream: 'new', machine: 5 }), code: 'invalid_message' as const, id, stream: 'new' },
      { data: json({ op: 'subscribe', stream: 'idle-chat', afterSeq: -1 }), code: 'invalid_message' as const, stream: 'idle-chat' },
      { data: json({ op: 'subscribe', stream: 'idle-chat', extra: true }), code: 'invalid_message' as const, stream: 'idle-chat' },
      { data: json({ op: 'unsubscribe' }), code: 'invalid_message' as const },
    ),
    // unknown streams
    fc.constantFrom(
      { data: json({ op: 'dispatch', id, stream: `nope-${i}`, event: interact }), code: 'unknown_stream' as const, id, stream: `nope-${i}` },
      { data: json({ op: 'subscribe', stream: `nope-${i}` }), code: 'unknown_stream' as const, stream: `nope-${i}` },
    ),
    // over maxFrameBytes (a valid message otherwise), and binary
    fc.constant({ data: json({ op: 'dispatch', id, stream: 'idle-chat', event: { ...interact, pad: 'x'.repeat(MAX_FRAME) } }), code: 'frame_too_large' as const }),
    fc.uint8Array({ maxLength: 20 }).map((bytes) => ({ data: Buffer.from(bytes), binary: true, code: 'binary_frame' as const })),
    // events and spawns the engine refuses
    fc.constantFrom(
      { data: json({ op: 'dispatch', id, stream: 'idle-chat', event: complete }), code: 'not_allowed' as const, id, stream: 'idle-chat' },
      { data: json({ op: 'dispatch', id, stream: 'done', event: { type: 'Ping' } }), code: 'terminal_state' as const, id, stream: 'done' },
      { data: json({ op: 'dispatch', id, stream: 'idle-chat', event: { type: 'Explode' } }), code: 'unknown_event' as const, id, stream: 'idle-chat' },
      {
        data: json({ op: 'dispatch', id, stream: 'idle-chat', event: { type: 'ProcessInteraction', userId: 'x' } }),
        code: 'invalid_event' as const,
        id,
        stream: 'idle-chat',
      },
      { data: json({ op: 'spawn', id, stream: 'idle-chat', machine: 'chat-actor' }), code: 'stream_exists' as const, id, stream: 'idle-chat' },
      { data: json({ op: 'spawn', id, stream: `s-${i}`, machine: 'no-such' }), code: 'unknown_machine' as const, id, stream: `s-${i}` },
      { data: json({ op: 'spawn', id, stream: `b-${i}`, machine: 'circuit-breaker', input: {} }), code: 'invalid_input' as const, id, stream: `b-${i}` },
    ),
  );
};

/** Every stream's runes, for comparing the log before and after. */
async function contents(store: RuneStore): Promise<Record<string, Rune[]>> {
  const all: Record<string, Rune[]> = {};
  for await (const head of store.heads()) all[head.stream] = await store.read(head.stream);
  return all;
}

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

describe('server: bad input', () => {
  it('answers each of thousands of bad frames with one error; other clients, the server and the log carry on', async () => {
    const store = memoryStore();
    const h = await startServer({ maxFrameBytes: MAX_FRAME, dispatchRate: { perSecond: 1e6, burst: 1e6 } }, { store });
    stop = h.stop;
    await h.engine.spawn('idle-chat', 'chat-actor');
    await h.engine.spawn('done', 'chat-actor');
    await h.engine.dispatch('done', { type: 'Cancel', reason: 'user_cancelled' });
    await h.engine.spawn('live', 'chat-actor');
    const before = await contents(store);

    const [fuzzer, driver, watcher] = [await h.connect(), await h.connect(), await h.connect()];
    watcher.send({ op: 'subscribe', stream: 'live' });
    await watcher.next((m) => m.op === 'snapshot');

    const frames = fc.sample(fc.tuple(...range(0, 2999).map(badFrame)), { numRuns: 1, seed: 20240607 })[0]!;
    const driven: Promise<unknown>[] = [];
    frames.forEach((frame, i) => {
      fuzzer.send(frame.data, { binary: frame.binary === true });
      if (i % 15 === 0) driven.push(driver.request({ op: 'dispatch', id: i, stream: 'live', event: (i / 15) % 2 === 0 ? interact : complete }));
    });
    await fuzzer.until(() => fuzzer.messages.length >= frames.length, `${frames.length} errors`);
    // A last request, answered after every frame before it: nothing more may have come meanwhile.
    expect(await fuzzer.request({ op: 'dispatch', id: 'last', stream: 'nope-last', event: interact })).toMatchObject({ code: 'unknown_stream' });

    expect(fuzzer.messages).toHaveLength(frames.length + 1);
    expect(fuzzer.messages.every((m) => m.op === 'error')).toBe(true);
    const byId = new Map(fuzzer.messages.flatMap((m) => (m.op === 'error' && m.id !== undefined ? [[m.id, m] as const] : [])));
    const withoutId = fuzzer.messages.filter((m) => m.op === 'error' && m.id === undefined);
    for (const frame of frames) {
      if (frame.id === undefined) continue;
      const error = byId.get(frame.id);
      expect(error, `frame ${String(frame.data).slice(0, 80)}`).toMatchObject({ code: frame.code });
      if (frame.stream === undefined) expect(error).not.toHaveProperty('stream');
      else expect(error).toHaveProperty('stream', frame.stream);
    }
    const count = (list: readonly { code: string }[]) => list.reduce<Record<string, number>>((acc, { code }) => ({ ...acc, [code]: (acc[code] ?? 0) + 1 }), {});
    expect(count(withoutId as { code: string }[])).toEqual(count(frames.filter((f) => f.id === undefined)));
    expect(new Set(frames.map((f) => f.code)).size).toBe(13); // every kind was tried

    // The other clients carried on: every dispatch acked, every rune seen, in order.
    const acks = await Promise.all(driven);
    expect(acks.every((a) => (a as { op: string }).op === 'ack')).toBe(true);
    await watcher.reach('live', driven.length + 1);
    expect(seqsOf(watcher.runes('live'))).toEqual(range(2, driven.length + 1));
    // The log: unchanged but for the driven stream.
    const after = await contents(store);
    expect(after.live).toHaveLength(driven.length + 1);
    expect({ ...after, live: [] }).toEqual({ ...before, live: [] });
    // The server is still up for newcomers.
    const late = await h.connect();
    expect(await late.request({ op: 'spawn', id: 1, stream: 'late', machine: 'chat-actor' })).toEqual({ op: 'ack', id: 1, seq: 1 });
  });

  it('pins the shape of each server error', async () => {
    const h = await startServer({ maxFrameBytes: 64 });
    stop = h.stop;
    const c = await h.connect();
    const answer = async (data: string | Buffer, binary = false) => {
      c.send(data, { binary });
      return c.next((m) => m.op === 'error');
    };
    // V8 words the JSON error itself (and differently across Node versions).
    expect(await answer('{nope')).toEqual({ op: 'error', code: 'invalid_json', message: expect.stringMatching(/^invalid JSON: .*position 1/) });
    expect(await answer('[1]')).toMatchInlineSnapshot(`
      {
        "code": "invalid_message",
        "message": "(root): expected a JSON object with an "op", got an array",
        "op": "error",
      }
    `);
    expect(await answer(json({ op: 'fly', id: 3 }))).toMatchInlineSnapshot(`
      {
        "code": "unknown_op",
        "id": 3,
        "message": "unknown op "fly"; the ops are spawn, dispatch, subscribe, unsubscribe",
        "op": "error",
      }
    `);
    expect(await answer(json({ op: 'dispatch', id: 4, stream: 's', event: 1 }))).toMatchInlineSnapshot(`
      {
        "code": "invalid_message",
        "id": 4,
        "message": "invalid "dispatch" message: event: Invalid input: expected object, received number",
        "op": "error",
        "stream": "s",
      }
    `);
    expect(await answer(Buffer.from([1, 2]), true)).toMatchInlineSnapshot(`
      {
        "code": "binary_frame",
        "message": "binary frames are not supported: send each message as a JSON text frame",
        "op": "error",
      }
    `);
    expect(await answer('x'.repeat(65))).toMatchInlineSnapshot(`
      {
        "code": "frame_too_large",
        "message": "a frame of 65 bytes is over the limit of 64 bytes (maxFrameBytes)",
        "op": "error",
      }
    `);
  });

  it("closes with 1009 a frame over maxPayloadBytes (ws's own hard limit)", async () => {
    const h = await startServer({ maxFrameBytes: 64, maxPayloadBytes: 128 });
    stop = h.stop;
    const c = await h.connect();
    c.send('x'.repeat(129));
    expect((await c.closed).code).toBe(1009);
  });
});
