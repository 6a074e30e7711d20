import { performance } from 'node:perf_hooks';
import { firstValueFrom } from 'rxjs';
import type { Rune } from '../src/index.js';
import { percentile, within } from './harness.js';
import { serveCluster } from './serve-cluster.js';

/** Dispatches per second, and how many: paced, so the figure is latency, not a queue. */
const PER_SECOND = 100;
const DISPATCHES = 1_000;
const WARMUP = 100;

/**
 * Issue 15: the latency from a dispatch on one `runestream serve --store` process to a subscriber
 * of the stream on another (each process with its WebSocket client, one PostgreSQL schema): a
 * chat actor's `Ping` sent by the client of process A every 10 ms, timed from the send to the
 * rune reaching the client of process B (the path: A's engine, the append, NOTIFY, B's tail
 * catch-up, B's engine, B's WebSocket). Information: p50 and p99, and the same dispatch's own
 * acknowledgement on A for comparison.
 */
export async function benchPostgresLatency(): Promise<boolean> {
  const cluster = serveCluster({ models: { offline: { type: 'demo' } }, agents: { assistant: { model: 'offline' } }, defaultRole: 'assistant' });
  try {
    const sender = await cluster.start();
    const receiver = await cluster.start();
    const stream = 'chat/latency';
    await sender.spawn(stream, 'chat-actor');
    const sentAt = new Map<number, number>();
    const crossed: number[] = [];
    const acked: number[] = [];
    let heard = 0;
    const allHeard = new Promise<void>((resolve) => {
      receiver.runes$(stream).subscribe((rune: Rune) => {
        const at = sentAt.get(rune.seq);
        if (at !== undefined && rune.seq > WARMUP + 1) crossed.push(performance.now() - at);
        if (++heard === DISPATCHES) resolve();
      });
    });
    await firstValueFrom(receiver.state$(stream));
    for (let i = 0; i < DISPATCHES; i++) {
      const started = performance.now();
      // seq i + 2: the spawn is 1 and this client is the only writer.
      sentAt.set(i + 2, started);
      void sender.dispatch(stream, { type: 'Ping' }).then(() => {
        if (i >= WARMUP) acked.push(performance.now() - started);
      });
      await new Promise((resolve) => setTimeout(resolve, 1000 / PER_SECOND));
    }
    await within(allHeard, 30_000, 'the subscriber on process B');
    crossed.sort((x, y) => x - y);
    acked.sort((x, y) => x - y);
    const ms = (n: number) => `${n.toFixed(1)} ms`;
    console.log(`\nPing dispatched on process A to a subscriber on process B (one PostgreSQL log), ${PER_SECOND}/s, ${DISPATCHES - WARMUP} timed`);
    console.log(`  A's dispatch to B's subscriber   p50 ${ms(percentile(crossed, 50))}, p99 ${ms(percentile(crossed, 99))}`);
    console.log(`  A's own acknowledgement          p50 ${ms(percentile(acked, 50))}, p99 ${ms(percentile(acked, 99))}`);
    console.log('  (information: no bar)');
    return true;
  } finally {
    await cluster.close();
  }
}
