import { VirtualTimeScheduler, filter, firstValueFrom } from 'rxjs';
import { WebSocket } from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import type { Rune } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { createClient, type ClientError } from '../../src/server/client/index.js';
import { LISTENING, cleanUpProcesses, runestream, tempDb } from '../support/runestream-process.js';

afterEach(cleanUpProcesses);

const DISPATCHES = 60;
const KILL_AFTER = 25;

describe('client and server: the server process dies mid-stream', () => {
  it('reconnects to the restarted server and ends with every rune exactly once, in order', async () => {
    const db = tempDb();
    const first = runestream(['serve', '--port', '0', '--db', db]);
    const [, url, port] = await first.line(LISTENING);
    // Short backoff: the test waits for events, never for time, so this only makes it quick.
    const options = { url: url!, WebSocket, backoff: { baseMs: 20, maxMs: 200 } };
    const driver = createClient(options);
    // The watcher reconnects only when the test flushes its clock: so the driver's dispatches
    // after the restart happen while it is away, and it must catch up with afterSeq.
    const watcherClock = new VirtualTimeScheduler();
    const watcher = createClient({ ...options, scheduler: watcherClock });

    await driver.spawn('chat-1', 'chat-actor');
    const seen: number[] = [];
    let lastSeen = 0;
    let wake: (() => void) | undefined;
    watcher.runes$('chat-1').subscribe((rune: Rune) => {
      seen.push(rune.seq);
      lastSeen = rune.seq;
      wake?.();
    });
    const seenUpTo = (seq: number): Promise<void> => (lastSeen >= seq ? Promise.resolve() : new Promise((resolve) => (wake = () => lastSeen >= seq && resolve())));

    // Pings, one after another. A dispatch in flight when the server dies is lost with
    // connection_lost (it may or may not have been applied); the driver goes on with the next.
    let acked = 0;
    let lost = 0;
    let lastAck = 1;
    let second: ReturnType<typeof runestream> | undefined;
    while (acked < DISPATCHES) {
      if (acked === KILL_AFTER && second === undefined) {
        await seenUpTo(lastAck); // the watcher is mid-stream
        const away = firstValueFrom(watcher.connectionState$.pipe(filter((state) => state === 'RECONNECTING')));
        first.child.kill('SIGKILL');
        await first.exited;
        await away;
        second = runestream(['serve', '--port', port!, '--db', db]);
        await second.line(LISTENING);
      }
      if (acked === KILL_AFTER + 10) watcherClock.flush(); // back, 10 runes behind
      try {
        lastAck = (await driver.dispatch('chat-1', { type: 'Ping' })).seq;
        acked++;
      } catch (error) {
        expect((error as ClientError).code).toBe('connection_lost');
        lost++;
      }
    }
    await seenUpTo(lastAck);
    await driver.close();
    await watcher.close();
    second!.child.kill('SIGTERM');
    expect(await second!.exited).toBe(0);

    // The log after both processes: every acknowledged dispatch is in it, and the watcher saw
    // each of its runes after the spawn once, in order, across the restart.
    const store = sqliteStore(db);
    const stored = (await store.read('chat-1')).map((rune) => rune.seq);
    await store.close();
    expect(stored.at(-1)).toBe(lastAck);
    expect(lastAck).toBeGreaterThanOrEqual(1 + DISPATCHES);
    expect(lastAck).toBeLessThanOrEqual(1 + DISPATCHES + lost);
    expect(seen[0]).toBeLessThanOrEqual(KILL_AFTER); // it was watching before the kill
    expect(seen).toEqual(stored.filter((seq) => seq >= seen[0]!));
  });
});
