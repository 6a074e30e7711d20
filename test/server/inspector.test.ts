import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, request } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { getDefaultHighWaterMark } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Subject, VirtualTimeScheduler } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { chatActor, createEngine, foldEvents, memoryStore, type EngineOptions, type Rune } from '../../src/index.js';
import type { StreamHead } from '../../src/streams/store.js';
import { countingStore } from '../support/counting-store.js';
import { sqliteStore } from '../../src/sqlite.js';
import { createServer } from '../../src/server/index.js';
import { inspectorAssetRoutes } from '../../src/server/inspector/inspector-assets.js';
import { createInspector, type InspectorSettings } from '../../src/server/inspector/inspector.js';
import { TravelCheckpoints } from '../../src/server/inspector/travel-checkpoints.js';
import { StreamDirectory, type DirectoryEntry } from '../../src/server/inspector/stream-directory.js';
import { fetchJson, SseClient, type SseBlock } from '../support/sse-client.js';
import { startServer } from '../support/ws-client.js';

const dir = mkdtempSync(join(tmpdir(), 'runestream-inspector-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
let files = 0;

/** A server with the inspector on a real SQLite file. */
async function inspected(options: Parameters<typeof startServer>[0] = {}, settings: Omit<InspectorSettings, 'store'> = {}, engineOptions: EngineOptions = {}) {
  const store = sqliteStore(join(dir, `inspector-${files++}.db`));
  const h = await startServer({ inspector: { store, batchMs: 20, ...settings }, ...options }, { store, ...engineOptions });
  cleanup.push(h.stop);
  const api = (path: string, headers: Record<string, string> = {}) => fetchJson(`${h.server.httpUrl}/inspector/api/${path}`, { headers });
  const feed = async (headers: Record<string, string> = {}) => {
    const sse = await SseClient.open(`${h.server.httpUrl}/inspector/api/feed`, headers);
    cleanup.push(() => sse.close());
    return sse;
  };
  return { ...h, store, api, feed };
}

const eventNamed = (name: string) => (block: SseBlock) => block.kind === 'event' && block.event === name;
const dataOf = (block: SseBlock) => (block as Extract<SseBlock, { kind: 'event' }>).data as DirectoryEntry[];

describe('inspector API', () => {
  it('the feed lists the stored streams, then each change once per batch with its new state', async () => {
    const h = await inspected();
    await h.engine.spawn('chat/a', 'chat-actor');
    await h.engine.spawn('chat/b', 'chat-actor');
    const sse = await h.feed();
    const listed = dataOf(await sse.next(eventNamed('streams')));
    expect(listed.map((entry) => [entry.stream, entry.machine, entry.seq, entry.value]).sort((x, y) => (x[0]! < y[0]! ? -1 : 1))).toEqual([
      ['chat/a', 'chat-actor', 1, 'idle'],
      ['chat/b', 'chat-actor', 1, 'idle'],
    ]);
    await h.engine.dispatch('chat/b', { type: 'ProcessInteraction', userId });
    await h.engine.spawn('chat/c', 'chat-actor');
    const changed: DirectoryEntry[] = [];
    while (!changed.some((entry) => entry.stream === 'chat/c')) changed.push(...dataOf(await sse.next(eventNamed('changes'))));
    expect(changed.find((entry) => entry.stream === 'chat/b')).toMatchObject({ seq: 2, value: 'running' });
    expect(changed.find((entry) => entry.stream === 'chat/c')).toMatchObject({ seq: 1, value: 'idle', machine: 'chat-actor' });
  });

  it('shows only the streams the caller may see, and refuses the others', async () => {
    const h = await inspected({ authorize: (_request, stream) => !stream.startsWith('secret/') });
    await h.engine.spawn('chat/open', 'chat-actor');
    await h.engine.spawn('secret/x', 'chat-actor');
    const sse = await h.feed();
    expect(dataOf(await sse.next(eventNamed('streams'))).map((entry) => entry.stream)).toEqual(['chat/open']);
    await h.engine.dispatch('secret/x', { type: 'Ping' });
    await h.engine.dispatch('chat/open', { type: 'Ping' });
    expect(dataOf(await sse.next(eventNamed('changes'))).map((entry) => entry.stream)).toEqual(['chat/open']);
    for (const path of ['runes', 'state?seq=1']) {
      const refused = await h.api(`streams/${encodeURIComponent('secret/x')}/${path}`);
      expect(refused.status).toBe(403);
      expect(refused.body).toMatchObject({ code: 'forbidden' });
    }
  });

  it("time travel: the state at each seq is the engine's fold of runes 1..seq", async () => {
    const h = await inspected();
    const stream = 'chat/travel';
    await h.engine.spawn(stream, 'chat-actor');
    for (const event of [
      { type: 'ProcessInteraction', userId },
      { type: 'InteractionComplete', success: true },
      { type: 'Pause', reason: 'lunch' },
      { type: 'ProcessInteraction', userId },
      { type: 'Cancel', reason: 'user_cancelled' },
    ]) {
      expect(await h.engine.dispatch(stream, event)).toMatchObject({ accepted: true });
    }
    const runes = await h.api(`streams/${encodeURIComponent(stream)}/runes`);
    expect(runes.status).toBe(200);
    const stored = (runes.body as { runes: Rune[] }).runes;
    expect(stored.map((rune) => rune.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    for (let seq = 1; seq <= stored.length; seq++) {
      const answer = await h.api(`streams/${encodeURIComponent(stream)}/state?seq=${seq}`);
      expect(answer.status).toBe(200);
      const folded = foldEvents(
        chatActor,
        undefined,
        0,
        stored.slice(0, seq).map((rune) => rune.event),
      );
      expect((answer.body as { state: unknown }).state).toEqual(folded);
    }
    expect(((await h.api(`streams/${encodeURIComponent(stream)}/state?seq=6`)).body as { state: unknown }).state).toEqual(
      await h.engine.snapshot(stream).then((s) => s?.state),
    );
    const page = await h.api(`streams/${encodeURIComponent(stream)}/runes?afterSeq=2&limit=2`);
    expect((page.body as { runes: Rune[]; headSeq: number }).runes.map((rune) => rune.seq)).toEqual([3, 4]);
    expect((page.body as { headSeq: number }).headSeq).toBe(6);
  });

  it('time travel folds from the latest snapshot at or before the seq, else from a state an earlier request kept: the runes read, counted', async () => {
    const store = sqliteStore(join(dir, `inspector-${files++}.db`));
    // The inspector reads through this: every rune it reads is counted.
    const { store: counting, counted } = countingStore(store);
    const h = await startServer({ inspector: { store: counting } }, { store, snapshotEvery: 100 });
    cleanup.push(h.stop);
    const stream = 'chat/long';
    await h.engine.spawn(stream, 'chat-actor');
    for (let seq = 2; seq <= 2450; seq += 50) await Promise.all(Array.from({ length: Math.min(50, 2451 - seq) }, () => h.engine.dispatch(stream, { type: 'Ping' })));
    expect((await store.head(stream))?.seq).toBe(2450);
    await expect.poll(async () => (await store.latestSnapshot(stream))?.seq).toBe(2400);
    const travel = async (seq: number) => {
      counted.runes = 0;
      const answer = await fetchJson(`${h.server.httpUrl}/inspector/api/streams/${encodeURIComponent(stream)}/state?seq=${seq}`);
      expect(answer.status).toBe(200);
      expect((answer.body as { state: unknown }).state).toEqual(foldEvents(chatActor, undefined, 0, await store.readEvents(stream, 0, seq)));
      return counted.runes;
    };
    expect(await travel(2450)).toBe(50); // from the snapshot at 2400
    expect(await travel(2401)).toBe(1);
    expect(await travel(1500)).toBe(1 + 1500); // before the snapshot: from seq 1 (its first rune read to see it is there), keeping seq 1000's state
    expect(await travel(1500)).toBe(500); // from seq 1000
    expect(await travel(1999)).toBe(999);
  });

  it('time travel where retention pruned the runes a snapshot covers: from the snapshot on, and 410 pruned before it', async () => {
    const h = await inspected({}, {}, { snapshotEvery: 5, retention: () => 'snapshot' });
    const stream = 'chat/pruned';
    await h.engine.spawn(stream, 'chat-actor');
    for (let i = 0; i < 11; i++) await h.engine.dispatch(stream, { type: 'Ping' });
    await expect.poll(async () => (await h.store.read(stream, 0, 1))[0]?.seq).toBe(11);
    const state = async (seq: number) => h.api(`streams/${encodeURIComponent(stream)}/state?seq=${seq}`);
    expect(await state(3)).toMatchObject({ status: 410, body: { code: 'pruned' } });
    expect((await state(10)).body).toMatchObject({ state: (await h.store.latestSnapshot(stream))?.state });
    expect((await state(12)).body).toMatchObject({ state: (await h.engine.snapshot(stream))?.state });
  });

  it('refuses a bad seq, a seq past the head and an unknown stream, each with its code', async () => {
    const h = await inspected();
    await h.engine.spawn('chat/x', 'chat-actor');
    const code = async (path: string) => {
      const answer = await h.api(path);
      return [answer.status, (answer.body as { code: string }).code];
    };
    expect(await code('streams/chat%2Fx/state?seq=abc')).toEqual([400, 'invalid_message']);
    expect(await code('streams/chat%2Fx/state')).toEqual([400, 'invalid_message']);
    expect(await code('streams/chat%2Fx/state?seq=0')).toEqual([400, 'invalid_message']);
    expect(await code('streams/chat%2Fx/runes?limit=-1')).toEqual([400, 'invalid_message']);
    expect(await code('streams/chat%2Fx/state?seq=9')).toEqual([416, 'beyond_head']);
    expect(await code('streams/chat%2Fnope/state?seq=1')).toEqual([404, 'unknown_stream']);
    expect(await code('streams/chat%2Fnope/runes')).toEqual([404, 'unknown_stream']);
  });

  it("gives each machine's states and table edges, for the diagrams", async () => {
    const h = await inspected();
    const answer = await h.api('machines');
    const machines = (answer.body as { machines: { id: string; states: string[]; edges: { from: string; on: string; to: string }[] }[] }).machines;
    const chat = machines.find((machine) => machine.id === 'chat-actor')!;
    expect(chat.states).toEqual(chatActor.states);
    expect(chat.edges).toContainEqual(expect.objectContaining({ from: 'idle', on: 'ProcessInteraction', to: 'running' }));
  });

  it('the API is behind the token; the page is not (it asks for the token)', async () => {
    const h = await inspected({ token: 'sesame' });
    expect((await h.api('machines')).status).toBe(401);
    expect((await h.api('machines', { authorization: 'Bearer sesame' })).status).toBe(200);
    // Built by `prepare` when the checkout was installed.
    const page = await fetch(`${h.server.httpUrl}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(await page.text()).toContain('/inspector/assets/inspector.js');
    const missing = await fetch(`${h.server.httpUrl}/inspector/assets/..%2Fpackage.json`);
    expect(missing.status).toBe(404);
  });
});

/** A GET that resolves at its headers when it is 200 (left open, closed by the test's cleanup), else once its JSON body is in. */
function opened(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body?: { code: string; message: string } }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      if (res.statusCode === 200) {
        cleanup.push(() => void res.destroy());
        return resolve({ status: 200 });
      }
      let text = '';
      res.on('data', (chunk: Buffer) => (text += String(chunk)));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as { code: string; message: string } }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('inspector feeds', () => {
  it('the list comes in events of at most feedPageRows streams (`streams`, then `more`), which together list every stream; changes follow', async () => {
    const h = await inspected({}, { feedPageRows: 40 });
    for (let batch = 0; batch < 5; batch++) await Promise.all(Array.from({ length: 50 }, (_, i) => h.engine.spawn(`chat/p${batch * 50 + i}`, 'chat-actor')));
    const sse = await h.feed();
    const pages: DirectoryEntry[][] = [];
    const listed = new Set<string>();
    while (listed.size < 250) {
      const page = await sse.next((block) => block.kind === 'event' && (block.event === 'streams' || block.event === 'more'));
      expect((page as Extract<SseBlock, { kind: 'event' }>).event).toBe(pages.length === 0 ? 'streams' : 'more');
      pages.push(dataOf(page));
      for (const entry of dataOf(page)) listed.add(entry.stream);
    }
    expect(Math.max(...pages.map((page) => page.length))).toBe(40);
    expect(pages.length).toBe(Math.ceil(250 / 40));
    expect([...listed].sort()).toEqual(Array.from({ length: 250 }, (_, i) => `chat/p${i}`).sort());
    await h.engine.dispatch('chat/p7', { type: 'ProcessInteraction', userId });
    expect(dataOf(await sse.next(eventNamed('changes')))).toEqual([expect.objectContaining({ stream: 'chat/p7', seq: 2, value: 'running' })]);
  });

  it('a reader that reads nothing holds one page, not the list: the next page is written once its socket took the one before; when it reads, it gets every stream; one that never reads is closed at the second ping', async () => {
    // 30,000 listed streams with long ids (about 10 MB of list): more than the kernel's socket buffers take.
    const count = 30_000;
    const id = (i: number) => `user/${'p'.repeat(230)}/${i}`;
    const store = Object.assign(memoryStore(), {
      heads: async function* () {
        for (let i = 0; i < count; i++) yield { stream: id(i), machine: 'chat-actor', seq: 1, value: 'idle', at: i };
      },
    });
    const engine = createEngine({ store });
    const scheduler = new VirtualTimeScheduler();
    const inspector = createInspector({ engine, store, feedPageRows: 200, scheduler });
    const server = await createServer({
      engine,
      port: 0,
      routes: inspector.routes.filter((route) => route.open === undefined).map(({ method, path, handler }) => ({ method, path, handler })),
    });
    cleanup.push(async () => {
      inspector.close();
      await server.close();
      await engine.close();
    });
    const reader = () => {
      const socket = connect(server.port, '127.0.0.1');
      cleanup.push(() => void socket.destroy());
      socket.pause();
      socket.write(`GET /inspector/api/feed HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`);
      return socket;
    };
    const socket = reader();
    // Once the kernel's buffers are full, what the server holds for it stays at most one page.
    await expect.poll(() => inspector.readers.bufferedBytes, { timeout: 20_000 }).toBeGreaterThan(0);
    // A page, plus what the socket may hold of the one before when `write` still said go on: its
    // high-water mark, Node's default (16 KiB on Node 20, 64 KiB from Node 22).
    const onePage = 200 * Buffer.byteLength(JSON.stringify({ stream: id(count), machine: 'chat-actor', seq: 1, value: 'idle', at: count })) + 100;
    const bound = onePage + getDefaultHighWaterMark(false) + 1024;
    expect(inspector.readers).toEqual({ open: 1, bufferedBytes: expect.any(Number) });
    expect(inspector.readers.bufferedBytes).toBeLessThanOrEqual(bound);
    // It reads: every stream comes, paced by its socket.
    const seen = new Set<string>();
    let text = '';
    let pings = 0;
    await new Promise<void>((resolve) => {
      socket.on('data', (chunk: Buffer) => {
        text += String(chunk);
        for (let end = text.indexOf('\n\n'); end >= 0; end = text.indexOf('\n\n')) {
          const data = text
            .slice(0, end)
            .split('\n')
            .find((line) => line.startsWith('data: '));
          if (text.slice(0, end).endsWith(': ping')) pings++;
          text = text.slice(end + 2);
          if (data !== undefined) for (const entry of JSON.parse(data.slice(6)) as DirectoryEntry[]) seen.add(entry.stream);
        }
        if (seen.size === count) resolve();
      });
      socket.resume();
    });
    expect(seen.size).toBe(count);

    // Another reads nothing, ever: at the second ping its socket has taken nothing since the first, and it is closed.
    reader();
    await expect.poll(() => inspector.readers.open).toBe(2);
    await expect.poll(() => inspector.readers.bufferedBytes, { timeout: 20_000 }).toBeGreaterThan(0);
    for (const ping of [1, 2]) {
      scheduler.maxFrames = ping * 15_000;
      scheduler.flush();
      await expect.poll(() => pings).toBe(ping); // the one that reads took its ping
    }
    await expect.poll(() => inspector.readers.open).toBe(1); // the one that reads stays
  });

  it('refuses a limit that is not a positive integer, naming it', () => {
    const engine = createEngine();
    cleanup.push(() => engine.close());
    for (const name of ['maxReaders', 'maxReadersPerIdentity', 'feedPageRows'])
      expect(() => createInspector({ engine, store: memoryStore(), [name]: 0 })).toThrow(`inspector: "${name}" must be a positive integer, got 0`);
    expect(() => createInspector({ engine, store: memoryStore(), travelCheckpoints: -1 })).toThrow('inspector: "travelCheckpoints" must be a non-negative integer, got -1');
  });

  it('at most maxReaders feeds are open, maxReadersPerIdentity per identity: one more is 503 too_many_readers', async () => {
    const h = await inspected({ verify: ({ token }) => (token === undefined ? undefined : { id: token }) }, { maxReaders: 3, maxReadersPerIdentity: 2 });
    const feed = (who: string) => opened(`${h.server.httpUrl}/inspector/api/feed?token=${who}`);
    expect((await feed('alice')).status).toBe(200);
    expect((await feed('alice')).status).toBe(200);
    expect(await feed('alice')).toMatchObject({ status: 503, body: { code: 'too_many_readers', message: expect.stringContaining('"maxReadersPerIdentity"') } });
    expect((await feed('bob')).status).toBe(200);
    expect(await feed('carol')).toMatchObject({ status: 503, body: { code: 'too_many_readers', message: expect.stringContaining('"maxReaders"') } });
    // One closes: its place is free again.
    await cleanup.pop()!();
    await expect.poll(async () => (await feed('carol')).status).toBe(200);
  });
});

describe('the inspector page cannot be framed', () => {
  it("sends frame-ancestors 'none' and X-Frame-Options DENY on the page and its files, and lets it connect to its own origin only", async () => {
    const h = await inspected();
    const host = `127.0.0.1:${h.server.port}`;
    for (const path of ['/', '/inspector/assets/inspector.js', '/inspector/assets/inspector.css']) {
      const answer = await fetch(`${h.server.httpUrl}${path}`);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('x-frame-options')).toBe('DENY');
      const policy = Object.fromEntries(
        answer.headers
          .get('content-security-policy')!
          .split(';')
          .map((directive) => directive.trim().split(' '))
          .map(([name, ...values]) => [name, values]),
      );
      expect(policy['frame-ancestors']).toEqual(["'none'"]);
      expect(policy['connect-src']).toEqual(["'self'", `ws://${host}`, `wss://${host}`]);
    }
  });
});

describe('the inspector page, not built', () => {
  it('answers 503 inspector_not_built, saying how to build it', async () => {
    const [page] = inspectorAssetRoutes(join(dir, 'never-built/'));
    const http = createHttpServer((req, res) => page!.open!(res, { ok: false, status: 401, code: 'unauthorized', message: '' }, new URL(req.url!, 'http://x')));
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    try {
      const answer = await fetchJson(`http://127.0.0.1:${(http.address() as AddressInfo).port}/`);
      expect(answer).toMatchObject({ status: 503, body: { code: 'inspector_not_built', message: expect.stringContaining('npm run build:inspector') } });
    } finally {
      await new Promise((resolve) => http.close(resolve));
    }
  });
});

describe('StreamDirectory', () => {
  const head = (stream: string, seq: number, at: number, value = 'idle'): StreamHead => ({ stream, machine: 'chat-actor', seq, value, at });
  const rune = (stream: string, seq: number, at: number, to?: string): Rune =>
    ({ stream, seq, machine: 'chat-actor', kind: 'Ping', event: { type: 'Ping' }, at, ...(to === undefined ? {} : { to }) }) as Rune;
  async function* heads(list: StreamHead[], before?: () => void) {
    before?.();
    for (const h of list) yield h;
  }

  it('never moves a stream back: a listed head older than a live rune already heard is ignored', async () => {
    const runes$ = new Subject<Rune>();
    const directory = new StreamDirectory({ heads: () => heads([head('s', 3, 30)], () => runes$.next(rune('s', 4, 40, 'running'))), runes$ });
    await directory.ready;
    expect(directory.get('s')).toMatchObject({ seq: 4, value: 'running', at: 40 });
    runes$.next(rune('s', 5, 50)); // no state change: the state name stays
    expect(directory.get('s')).toMatchObject({ seq: 5, value: 'running' });
    directory.close();
  });

  it('keeps at most maxStreams, the most recently active', async () => {
    const runes$ = new Subject<Rune>();
    const directory = new StreamDirectory({ heads: () => heads(Array.from({ length: 20 }, (_, i) => head(`s${i}`, 1, i))), runes$ }, { maxStreams: 10 });
    await directory.ready;
    expect(directory.size).toBeLessThanOrEqual(10);
    expect(directory.get('s19')).toBeDefined();
    expect(directory.get('s0')).toBeUndefined();
    runes$.next(rune('s0', 2, 100)); // active again: back on the list
    expect(directory.entries()[0]).toMatchObject({ stream: 's0', seq: 2 });
    directory.close();
  });

  it('a listing that fails leaves the live streams and says why', async () => {
    const runes$ = new Subject<Rune>();
    const failing = {
      heads: () => ({
        [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(new Error('disk gone')) }),
      }),
      runes$,
    };
    const directory = new StreamDirectory(failing as never);
    await directory.ready;
    expect(String(directory.listingError)).toMatch(/disk gone/);
    runes$.next(rune('live', 1, 1, 'idle'));
    expect(directory.size).toBe(1);
    directory.close();
  });
});

describe('TravelCheckpoints', () => {
  it('keeps states at every 1000th seq only, at most max of them, the least recently used dropped first', () => {
    const kept = new TravelCheckpoints(2);
    kept.keep('s', 999, 'no');
    expect(kept.size).toBe(0);
    kept.keep('s', 1000, 'a');
    kept.keep('s', 2000, 'b');
    expect(kept.nearest('s', 1500, 0)).toEqual({ seq: 1000, state: 'a' }); // used: now the most recent
    kept.keep('t', 1000, 'c');
    expect(kept.size).toBe(2);
    expect(kept.nearest('s', 2500, 0)).toEqual({ seq: 1000, state: 'a' }); // 2000 was dropped
    expect(kept.nearest('s', 2500, 1000)).toBeUndefined(); // nothing after the start the caller has
    expect(kept.nearest('t', 1000, 0)).toEqual({ seq: 1000, state: 'c' });
  });
});
