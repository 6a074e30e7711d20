import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { once } from 'node:events';
import { VirtualTimeScheduler } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { chatActor, type ChatActorState } from '../../src/index.js';
import { SERVER_CHANNELS, type SentReport, type ServerOptions, type SlowClientReport } from '../../src/server/index.js';
import { range, seqsOf, startServer } from '../support/ws-client.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const MARK = 64 * 1024;
const bigReason = 'r'.repeat(16 * 1024);
/** idle -> paused (a 16 KiB rune) -> idle -> ... */
const nth = (n: number) => (n % 2 === 0 ? { type: 'Pause', reason: bigReason } : { type: 'ProcessInteraction', userId });

/** Listens to the server's diagnostics channels for one test. */
function watchDiagnostics() {
  const sent: SentReport[] = [];
  const slow: SlowClientReport[] = [];
  const onSent = (m: unknown) => void sent.push(m as SentReport);
  const onSlow = (m: unknown) => void slow.push(m as SlowClientReport);
  subscribe(SERVER_CHANNELS.sent, onSent);
  subscribe(SERVER_CHANNELS.slowClient, onSlow);
  return {
    sent,
    slow,
    stop: () => {
      unsubscribe(SERVER_CHANNELS.sent, onSent);
      unsubscribe(SERVER_CHANNELS.slowClient, onSlow);
    },
  };
}

let cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

/** A server with a paused (not reading) client and a reading one, both subscribed to "chat". */
async function setUp(slowClient: 'coalesce' | 'close', options: Partial<ServerOptions> = {}) {
  const diagnostics = watchDiagnostics();
  const h = await startServer({ maxBufferedBytes: MARK, slowClient, ...options });
  cleanup.push(h.stop, diagnostics.stop);
  await h.engine.spawn('chat', 'chat-actor');
  const slow = await h.connect();
  const fast = await h.connect();
  for (const c of [slow, fast]) c.send({ op: 'subscribe', stream: 'chat' });
  await Promise.all([slow, fast].map((c) => c.next((m) => m.op === 'snapshot')));
  slow.ws.pause(); // its socket stops reading: the kernel buffers fill, then the server's
  let dispatched = 0;
  /**
   * One dispatch, then a turn of the event loop for the sockets: a memory store commits at once,
   * and a loop that never yields would leave the reading client no time to read either.
   */
  const dispatchOne = async () => {
    await h.engine.dispatch('chat', nth(dispatched++));
    await new Promise((resolve) => setImmediate(resolve));
  };
  /** Dispatches until the server reports the slow client (the kernel's buffers vary), then `extra` more. */
  const flood = async (extra: number) => {
    while (diagnostics.slow.length === 0) {
      if (dispatched > 20_000) throw new Error('the server never reported the slow client');
      await dispatchOne();
    }
    for (let i = 0; i < extra; i++) await dispatchOne();
    return dispatched + 1; // the last seq
  };
  return { h, slow, fast, diagnostics, flood };
}

const maxBuffered = (sent: readonly SentReport[], connection: number) => Math.max(0, ...sent.filter((r) => r.connection === connection).map((r) => r.bufferedAmount));

describe('server: a client that stops reading', () => {
  it("'coalesce': its buffer stays near the mark, others get every rune, and once it reads again it gets a snapshot and the runes after it", async () => {
    const { h, slow, fast, diagnostics, flood } = await setUp('coalesce');
    const last = await flood(300);
    const slowId = diagnostics.slow[0]!.connection;
    expect(new Set(diagnostics.slow.map((r) => r.connection))).toEqual(new Set([slowId]));
    expect(diagnostics.slow[0]!.policy).toBe('coalesce');
    // Bounded: at most the mark plus the one frame that crossed it, however many runes flowed.
    const frame = Math.max(...diagnostics.sent.map((r) => r.bytes));
    expect(maxBuffered(diagnostics.sent, slowId)).toBeLessThanOrEqual(MARK + frame);
    const sentToSlow = diagnostics.sent.filter((r) => r.connection === slowId).length;

    await fast.reach('chat', last);
    expect(seqsOf(fast.runes('chat'))).toEqual(range(2, last));

    slow.ws.resume();
    await slow.reach('chat', last);
    // Every rune in order until it fell behind, then a snapshot, then every rune after it.
    const snapshots = slow.messages.flatMap((m, i) => (m.op === 'snapshot' && i > 0 ? [{ i, m }] : []));
    expect(snapshots).toHaveLength(1);
    const { i, m: snapshot } = snapshots[0]!;
    if (snapshot.op !== 'snapshot') throw new Error('unreachable');
    const before = slow.messages.slice(1, i).flatMap((m) => (m.op === 'rune' ? [m.rune] : []));
    const after = slow.messages.slice(i + 1).flatMap((m) => (m.op === 'rune' ? [m.rune] : []));
    expect(seqsOf(before)).toEqual(range(2, before.length + 1));
    expect(snapshot.seq).toBeGreaterThan(before.length + 1);
    expect(seqsOf(after)).toEqual(range(snapshot.seq + 1, last));
    expect(sentToSlow).toBeLessThan(last); // it was not sent every rune
    const folded = after.reduce((s, r) => chatActor.transition(s, r.event as never), snapshot.state as ChatActorState);
    expect(folded).toEqual((await h.engine.snapshot('chat'))!.state);
  });

  it("'close': it is closed with 4008 slow_client, and the others get every rune", async () => {
    const { slow, fast, diagnostics, flood } = await setUp('close');
    const last = await flood(50);
    expect(diagnostics.slow).toHaveLength(1);
    expect(diagnostics.slow[0]!.policy).toBe('close');
    await fast.reach('chat', last);
    expect(seqsOf(fast.runes('chat'))).toEqual(range(2, last));
    slow.ws.resume();
    expect(await slow.closed).toEqual({ code: 4008, reason: 'slow_client' });
  });

  it("'coalesce': a client still not reading at the next heartbeat gets a close frame, 4008 slow_client, not a dropped socket (1006)", async () => {
    const scheduler = new VirtualTimeScheduler();
    const { slow, fast, flood } = await setUp('coalesce', { scheduler, heartbeatMs: 1000 });
    const last = await flood(20);
    /** One heartbeat; the reading client's pong has been read once its request is answered. */
    const beat = async (id: string) => {
      const pinged = once(fast.ws, 'ping');
      scheduler.maxFrames = scheduler.frame + 1000;
      scheduler.schedule(() => undefined, 1000);
      scheduler.flush();
      await pinged;
      await fast.request({ op: 'dispatch', id, stream: 'chat', event: { type: 'ProcessInteraction', userId } });
    };
    await beat('first'); // pings both; the slow one cannot answer
    await beat('second'); // the slow one missed its pong while behind: closed with a reason
    await fast.reach('chat', last + 2);
    slow.ws.resume();
    expect(await slow.closed).toEqual({ code: 4008, reason: 'slow_client' });
  });
});
