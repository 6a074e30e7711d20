import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { WebSocket } from 'ws';
import { createEngine, type Rune } from '../src/index.js';
import { createClient } from '../src/server/client/index.js';
import { createServer } from '../src/server/index.js';
import { sqliteStore } from '../src/sqlite.js';
import { percentile, within } from './harness.js';

const STREAMS = 10_000;
/** Dispatches per second, and how many: paced, so the figure is latency, not a queue. */
const PER_SECOND = 20;
const DISPATCHES = 300;
const WARMUP = 20;

/**
 * Issue 16: the time from a dispatch to the inspector showing it, with 10,000 streams listed: a
 * chat actor's `Ping` sent by a Node client every 50 ms, timed from the send to the stream's row in
 * Debian's chromium showing the new seq (a MutationObserver in the page notes when; page and Node
 * share the clock). The anchor is the same dispatch reaching a plain WebSocket subscriber of the
 * stream. The inspector gathers list changes for `batchMs` (100 ms) by design, so the ratio shows
 * what the list costs on top. Information: p50 and p99 (no bar).
 */
export async function benchInspectorLatency(): Promise<boolean> {
  if (!existsSync('/usr/bin/chromium')) {
    console.log("\ninspector-latency: skipped, /usr/bin/chromium is missing (install Debian's chromium)");
    return true;
  }
  const dir = mkdtempSync(join(tmpdir(), 'runestream-bench-inspector-'));
  const store = sqliteStore(join(dir, 'log.db'));
  const engine = createEngine({ store });
  const server = await createServer({ engine, port: 0, inspector: { store } });
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
  const client = createClient({ url: server.url, WebSocket });
  try {
    for (let batch = 0; batch < STREAMS / 100; batch++) await Promise.all(Array.from({ length: 100 }, (_, i) => engine.spawn(`chat/bench-${batch * 100 + i}`, 'chat-actor')));
    const stream = 'chat/bench-watched';
    await engine.spawn(stream, 'chat-actor');
    // The bench's in-page probes are text, which the page's CSP (no eval) would refuse.
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
    await page.goto(`${server.httpUrl}/`);
    // In-page code is given as text: this file is compiled without the DOM's types.
    await page.waitForFunction(`(document.getElementById('stream-count')?.textContent ?? '').startsWith('${STREAMS + 1} of')`, undefined, { timeout: 30_000 });
    // The watched stream is the most recently active: the first row. Note when each of its seqs is first shown.
    await page.evaluate(`{
      const seen = {};
      window.seen = seen;
      const note = () => {
        const row = document.querySelector('#stream-rows .row[data-stream="${stream}"]');
        const seq = Number(row?.lastElementChild?.textContent?.slice(1));
        if (seq > 0 && seen[seq] === undefined) seen[seq] = Date.now();
      };
      new MutationObserver(note).observe(document.getElementById('stream-rows'), { childList: true, subtree: true, characterData: true });
    }`);

    const sentAt = new Map<number, number>();
    const subscriberAt = new Map<number, number>();
    let last = 1;
    client.runes$(stream).subscribe((rune: Rune) => subscriberAt.set(rune.seq, Date.now()));
    await new Promise<void>((resolve) => client.state$(stream).subscribe(() => resolve()));
    for (let i = 0; i < DISPATCHES; i++) {
      const seq = i + 2;
      sentAt.set(seq, Date.now());
      void engine.dispatch(stream, { type: 'Ping' });
      last = seq;
      await new Promise((resolve) => setTimeout(resolve, 1000 / PER_SECOND));
    }
    await within(page.waitForFunction(`window.seen?.[${last}] !== undefined`, undefined, { timeout: 30_000 }), 35_000, 'the inspector showing the last seq');
    const seen = (await page.evaluate('window.seen')) as Record<number, number>;
    // A batch shows only its latest seq: each dispatch is shown by the first batch at or after it.
    const shownAt = (seq: number): number | undefined => {
      for (let s = seq; s <= last; s++) if (seen[s] !== undefined) return seen[s];
      return undefined;
    };
    const shown: number[] = [];
    const heard: number[] = [];
    for (let seq = WARMUP + 2; seq <= last; seq++) {
      const at = shownAt(seq);
      if (at !== undefined) shown.push(at - sentAt.get(seq)!);
      const subscriber = subscriberAt.get(seq);
      if (subscriber !== undefined) heard.push(subscriber - sentAt.get(seq)!);
    }
    shown.sort((x, y) => x - y);
    heard.sort((x, y) => x - y);
    const ms = (n: number) => `${n.toFixed(0)} ms`;
    console.log(`\nDispatch to the inspector showing it, ${STREAMS.toLocaleString('en')} streams listed, ${PER_SECOND}/s, ${shown.length} timed`);
    console.log(`  inspector row (batchMs 100)       p50 ${ms(percentile(shown, 50))}, p99 ${ms(percentile(shown, 99))}`);
    console.log(`  anchor: a WebSocket subscriber    p50 ${ms(percentile(heard, 50))}, p99 ${ms(percentile(heard, 99))}`);
    console.log(`  ratio of p50s ${(percentile(shown, 50) / Math.max(1, percentile(heard, 50))).toFixed(1)}x (information: no bar)`);
    return true;
  } finally {
    await client.close();
    await browser.close();
    await server.close();
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
