import { afterEach, describe, expect, it } from 'vitest';
import { SseClient } from '../support/sse-client.js';
import { range, startServer } from '../support/ws-client.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
/** idle -> paused -> running -> paused -> ...: each rune after the first is one `state_changed` event. */
const nth = (n: number, reason = 'r') => (n % 2 === 0 ? { type: 'Pause', reason } : { type: 'ProcessInteraction', userId });

let cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

async function longStream(runes: number, maxBufferedBytes: number) {
  const h = await startServer({ heartbeatMs: 0, maxBufferedBytes });
  cleanup.push(h.stop);
  await h.engine.spawn('chat', 'chat-actor');
  for (let n = 0; n < runes - 1; n += 1000) {
    const results = await Promise.all(range(n, Math.min(n + 1000, runes - 1) - 1).map((i) => h.engine.dispatch('chat', nth(i))));
    expect(results.every((r) => r.accepted)).toBe(true);
  }
  return h;
}

describe('server: SSE resume from far back', () => {
  it('replays 20,000 stored runes to lastEventId=0, paced by the socket and never cut by maxBufferedBytes, then live ones', async () => {
    const last = 20_001;
    const h = await longStream(last, 4096);
    const sse = await SseClient.open(`${h.server.httpUrl}/streams/chat/events?lastEventId=0`);
    cleanup.push(() => sse.close());
    expect(sse.response.statusCode).toBe(200);
    await sse.next((b) => b.kind === 'event' && b.id === String(last));
    await h.engine.dispatch('chat', nth(last - 1)); // live, after the replay
    await sse.next((b) => b.kind === 'event' && b.id === String(last + 1));
    expect(sse.events.map((e) => Number(e.id))).toEqual(range(2, last + 1));
    expect(sse.events.every((e) => e.event === 'state_changed')).toBe(true);
  });

  it('still cuts a client that lets live events pile up past maxBufferedBytes; it resumes from Last-Event-ID with no gap', async () => {
    const h = await longStream(1, 4096);
    const sse = await SseClient.open(`${h.server.httpUrl}/streams/chat/events`);
    await sse.next((b) => b.kind === 'comment');
    sse.response.socket.pause(); // stops reading: the server's buffer grows
    let dispatched = 0;
    while (!sse.response.socket.destroyed && h.server.connections > 0) {
      expect(await h.engine.dispatch('chat', nth(dispatched++, 'x'.repeat(4096)))).toMatchObject({ accepted: true });
      await new Promise((resolve) => setImmediate(resolve));
      if (dispatched > 20_000) throw new Error('never cut');
    }
    const lastSeen = Math.max(1, ...sse.events.map((e) => Number(e.id)));
    const resumed = await SseClient.open(`${h.server.httpUrl}/streams/chat/events`, { 'last-event-id': String(lastSeen) });
    cleanup.push(() => resumed.close());
    await resumed.next((b) => b.kind === 'event' && b.id === String(dispatched + 1));
    expect(resumed.events.map((e) => Number(e.id))).toEqual(range(lastSeen + 1, dispatched + 1));
  });
});
