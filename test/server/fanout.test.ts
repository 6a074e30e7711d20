import { afterEach, describe, expect, it, vi } from 'vitest';
import { chatActor, memoryStore, type ChatActorState, type RuneStore } from '../../src/index.js';
import { range, seqsOf, startServer } from '../support/ws-client.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const interact = { type: 'ProcessInteraction', userId } as const;
const complete = { type: 'InteractionComplete', success: true } as const;
/** The n-th event of an endless accepted sequence: idle -> running -> idle -> ... */
const nth = (n: number) => (n % 2 === 0 ? interact : complete);

/** A memory store whose reads take a few turns of the event loop: batches commit while a replay reads. */
function slowReads(inner: RuneStore = memoryStore()): RuneStore {
  const turn = () => new Promise((resolve) => setImmediate(resolve));
  return { ...inner, read: async (...args) => (await turn(), await turn(), await turn(), inner.read(...args)) };
}

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await stop?.();
  stop = undefined;
});

describe('server: spawn, dispatch, subscribe', () => {
  it('two clients: one dispatches, both receive the same runes in order; acks carry the seq', async () => {
    const h = await startServer();
    stop = h.stop;
    const [a, b] = [await h.connect(), await h.connect()];
    expect(await a.request({ op: 'spawn', id: 's', stream: 'chat', machine: 'chat-actor' })).toEqual({ op: 'ack', id: 's', seq: 1 });
    a.send({ op: 'subscribe', stream: 'chat' });
    b.send({ op: 'subscribe', stream: 'chat' });
    expect(await a.next((m) => m.op === 'snapshot')).toEqual({ op: 'snapshot', stream: 'chat', seq: 1, state: { value: 'idle' } });
    expect(await b.next((m) => m.op === 'snapshot')).toEqual({ op: 'snapshot', stream: 'chat', seq: 1, state: { value: 'idle' } });

    const acks = [];
    for (let i = 0; i < 20; i++) acks.push(a.request({ op: 'dispatch', id: i, stream: 'chat', event: nth(i) }));
    expect(await Promise.all(acks)).toEqual(range(0, 19).map((i) => ({ op: 'ack', id: i, seq: i + 2 })));
    await Promise.all([a.reach('chat', 21), b.reach('chat', 21)]);
    expect(seqsOf(a.runes('chat'))).toEqual(range(2, 21));
    expect(b.runes('chat')).toEqual(a.runes('chat'));
    expect(b.runes('chat')[0]).toMatchObject({ stream: 'chat', seq: 2, machine: 'chat-actor', kind: 'ProcessInteraction', from: 'idle', to: 'running' });
    expect(h.server.connections).toBe(2);
  });

  it('answers an engine rejection with its code, echoing id and stream, and appends nothing', async () => {
    const h = await startServer();
    stop = h.stop;
    const a = await h.connect();
    await a.request({ op: 'spawn', id: 1, stream: 'chat', machine: 'chat-actor' });
    expect(await a.request({ op: 'dispatch', id: 2, stream: 'chat', event: complete })).toEqual({
      op: 'error',
      id: 2,
      stream: 'chat',
      code: 'not_allowed',
      message: 'event "InteractionComplete" is not allowed in state "idle"',
    });
    expect(await a.request({ op: 'spawn', id: 3, stream: 'chat', machine: 'chat-actor' })).toMatchObject({ code: 'stream_exists', id: 3 });
    expect(await a.request({ op: 'spawn', id: 4, stream: 'x', machine: 'nope' })).toMatchObject({ code: 'unknown_machine', stream: 'x' });
    expect(await a.request({ op: 'dispatch', id: 5, stream: 'nobody', event: interact })).toMatchObject({ code: 'unknown_stream' });
    expect(await h.engine.snapshot('chat')).toEqual({ stream: 'chat', seq: 1, state: { value: 'idle' } });
  });

  it('subscribe to an unknown stream is an error; unsubscribe stops the runes', async () => {
    const h = await startServer();
    stop = h.stop;
    const a = await h.connect();
    a.send({ op: 'subscribe', stream: 'ghost' });
    expect(await a.next((m) => m.op === 'error')).toEqual({ op: 'error', stream: 'ghost', code: 'unknown_stream', message: 'unknown stream "ghost"' });

    await h.engine.spawn('chat', 'chat-actor');
    a.send({ op: 'subscribe', stream: 'chat' });
    await a.next((m) => m.op === 'snapshot');
    await h.engine.dispatch('chat', interact);
    await a.reach('chat', 2);
    a.send({ op: 'unsubscribe', stream: 'chat' });
    // A request after the unsubscribe: once it is answered, the unsubscribe has taken effect.
    await a.request({ op: 'dispatch', id: 'after', stream: 'chat', event: complete });
    await h.engine.dispatch('chat', interact);
    await a.request({ op: 'dispatch', id: 'fence', stream: 'chat', event: complete });
    expect(seqsOf(a.runes('chat'))).toEqual([2]);
  });

  it('a second subscribe of a stream restarts it from the given afterSeq', async () => {
    const h = await startServer();
    stop = h.stop;
    await h.engine.spawn('chat', 'chat-actor');
    for (let i = 0; i < 5; i++) await h.engine.dispatch('chat', nth(i));
    const a = await h.connect();
    a.send({ op: 'subscribe', stream: 'chat', afterSeq: 4 });
    await a.reach('chat', 6);
    a.send({ op: 'subscribe', stream: 'chat', afterSeq: 2 });
    await a.find((m) => m.op === 'rune' && m.rune.seq === 3);
    await a.until(() => a.runes('chat').length === 6, 'six runes');
    expect(seqsOf(a.runes('chat'))).toEqual([5, 6, 3, 4, 5, 6]);
    await h.engine.dispatch('chat', nth(5));
    await a.reach('chat', 7);
    expect(seqsOf(a.runes('chat'))).toEqual([5, 6, 3, 4, 5, 6, 7]);
  });

  it('subscribe with afterSeq while dispatches continue: every rune exactly once, in order, for joiners at many seqs', async () => {
    const h = await startServer({ dispatchRate: { perSecond: 1e6, burst: 1e6 } }, { store: slowReads() });
    stop = h.stop;
    const driver = await h.connect();
    await driver.request({ op: 'spawn', id: 'spawn', stream: 'chat', machine: 'chat-actor' });
    const total = 400;
    const joinAt = [1, 3, 50, 120, 121, 250, 399];
    const joiners = await Promise.all(joinAt.map(() => h.connect()));
    const afterSeqs = new Map<unknown, number>();
    const acks: Promise<unknown>[] = [];
    for (let i = 0; i < total; i++) {
      acks.push(driver.request({ op: 'dispatch', id: i, stream: 'chat', event: nth(i) }));
      // Each joiner subscribes while dispatches are in flight, from a seq that is already durable.
      const j = joinAt.indexOf(i);
      if (j >= 0) {
        await acks[i];
        const afterSeq = Math.max(0, i - 7 * j);
        joiners[j]!.send({ op: 'subscribe', stream: 'chat', afterSeq });
        afterSeqs.set(joiners[j], afterSeq);
      }
    }
    await Promise.all(acks);
    const last = total + 1;
    await Promise.all(joiners.map((c) => c.reach('chat', last)));
    for (const joiner of joiners) {
      const afterSeq = afterSeqs.get(joiner)!;
      expect(joiner.messages.filter((m) => m.op === 'snapshot')).toEqual([]);
      expect(seqsOf(joiner.runes('chat'))).toEqual(range(afterSeq + 1, last));
    }
  });

  it('without afterSeq a joiner gets a snapshot, then exactly the runes after it, while dispatches continue', async () => {
    const h = await startServer({ dispatchRate: { perSecond: 1e6, burst: 1e6 } });
    stop = h.stop;
    await h.engine.spawn('chat', 'chat-actor');
    const watcher = await h.connect();
    watcher.send({ op: 'subscribe', stream: 'chat' }); // keeps the shared feed running
    await watcher.next((m) => m.op === 'snapshot');
    const joiners = await Promise.all(range(1, 5).map(() => h.connect()));
    const results: Promise<unknown>[] = [];
    for (let i = 0; i < 200; i++) {
      results.push(h.engine.dispatch('chat', nth(i)));
      if (i % 40 === 0) joiners[i / 40]!.send({ op: 'subscribe', stream: 'chat' });
    }
    await Promise.all(results);
    for (const joiner of joiners) {
      await joiner.reach('chat', 201);
      const snapshot = joiner.messages.find((m) => m.op === 'snapshot');
      if (snapshot?.op !== 'snapshot') throw new Error('no snapshot');
      expect(seqsOf(joiner.runes('chat'))).toEqual(range(snapshot.seq + 1, 201));
      // The snapshot plus the runes after it fold to the stream's state.
      const folded = joiner.runes('chat').reduce((s, r) => chatActor.transition(s, r.event as never), snapshot.state as ChatActorState);
      expect(folded).toEqual((await h.engine.snapshot('chat'))!.state);
    }
  });
  it('sends a snapshot first when the runes after afterSeq were pruned by retention', async () => {
    const h = await startServer({}, { snapshotEvery: 5, retention: () => 'snapshot' });
    stop = h.stop;
    await h.engine.spawn('chat', 'chat-actor');
    for (let i = 0; i < 11; i++) await h.engine.dispatch('chat', nth(i)); // seq 12; runes 1..10 pruned
    const c = await h.connect();
    c.send({ op: 'subscribe', stream: 'chat', afterSeq: 2 });
    expect(await c.next((m) => m.op === 'snapshot' || m.op === 'rune')).toEqual({ op: 'snapshot', stream: 'chat', seq: 12, state: { value: 'running', userId } });
    await h.engine.dispatch('chat', nth(11));
    await c.reach('chat', 13);
    expect(seqsOf(c.runes('chat'))).toEqual([13]);
  });
});

describe('server: one serialization per rune', () => {
  it('serializes each rune frame once per stream, whatever the number of clients, and stops when the last leaves', async () => {
    const h = await startServer();
    stop = h.stop;
    await h.engine.spawn('chat', 'chat-actor');
    const clients = await Promise.all(range(1, 10).map(() => h.connect()));
    for (const c of clients) c.send({ op: 'subscribe', stream: 'chat' });
    await Promise.all(clients.map((c) => c.next((m) => m.op === 'snapshot')));

    const stringify = vi.spyOn(JSON, 'stringify');
    const runeFrames = () => stringify.mock.calls.filter(([value]) => (value as { op?: unknown } | null)?.op === 'rune').length;
    for (let i = 0; i < 30; i++) await h.engine.dispatch('chat', nth(i));
    await Promise.all(clients.map((c) => c.reach('chat', 31)));
    expect(runeFrames()).toBe(30);
    for (const c of clients) expect(seqsOf(c.runes('chat'))).toEqual(range(2, 31));

    for (const c of clients) c.send({ op: 'unsubscribe', stream: 'chat' });
    await Promise.all(clients.map((c) => c.request({ op: 'dispatch', id: 'fence', stream: 'nobody', event: interact })));
    await h.engine.dispatch('chat', nth(30));
    expect(runeFrames()).toBe(30); // no feed left: nothing serialized
  });
});
