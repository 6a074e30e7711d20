/**
 * Issue 26, item 5 (inspector feeds and time travel) and item 8 (framing): replayed against a
 * real server on 127.0.0.1, at a scale that runs in well under a minute each.
 *
 *   node --expose-gc --import tsx -e "const { attacks } = await import('./scripts/attacks/inspector.ts'); for (const a of Object.values(attacks)) await a();"
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { get } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEngine } from '../../src/index.js';
import { sqliteStore } from '../../src/sqlite.js';
import { countingStore } from '../../test/support/counting-store.js';
import { heap, mib, ms, report, serve, signed, sleep, tally } from './kit.js';

/** How long a plain GET takes to answer (a bystander's view of the server). */
const timed = (url: string): Promise<number> =>
  new Promise((resolve) => {
    const started = performance.now();
    get(url, (response) => {
      response.resume();
      response.on('end', () => resolve(performance.now() - started));
    }).on('error', () => resolve(Number.NaN));
  });

/**
 * Feeds that never read: 20,000 streams with 200-character ids (about 6 MB of list, more than
 * the kernel's socket buffers take), then 100 feeds, each of its own identity, that read their
 * status line and nothing more.
 */
async function feeds(): Promise<void> {
  const store = sqliteStore(join(mkdtempSync(join(tmpdir(), 'runestream-attack-inspector-')), 'feeds.db'));
  const engine = createEngine({ store });
  const streams = 20_000;
  for (let batch = 0; batch < streams / 500; batch++)
    await Promise.all(Array.from({ length: 500 }, (_, i) => engine.spawn(`user/${'x'.repeat(200)}/${batch * 500 + i}`, 'chat-actor')));
  // Each reader with an identity of its own (a token each), so the total limit is the one met.
  const { server, stop } = await serve({ inspector: { store }, verify: ({ token }) => (token === undefined ? undefined : { id: token }) }, engine);
  // First a reader that reads the whole list (the server's own list is built by then).
  await new Promise<void>((resolve) => {
    let rows = 0;
    let partial = '';
    const request = get(`${server.httpUrl}/inspector/api/feed?token=reader`, (response) => {
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop()!; // a line not finished yet is counted with the next chunk
        for (const line of lines) rows += line.split('"stream":').length - 1;
        if (rows >= streams) {
          request.destroy();
          resolve();
        }
      });
    });
    request.on('error', () => resolve());
  });
  const before = await heap();
  const readers = 100;
  const statuses: number[] = [];
  const sockets: Socket[] = [];
  await Promise.all(
    Array.from(
      { length: readers },
      () =>
        new Promise<void>((resolve) => {
          const socket = connect(server.port, '127.0.0.1');
          sockets.push(socket);
          socket.on('error', () => resolve());
          socket.once('data', (chunk: Buffer) => {
            socket.pause(); // the status line, then nothing more
            statuses.push(Number(/^HTTP\/1\.1 (\d+)/.exec(String(chunk))?.[1] ?? 0));
            resolve();
          });
          socket.write(`GET /inspector/api/feed?token=r${sockets.length} HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`);
        }),
    ),
  );
  await sleep(3000); // the feeds write what their sockets take, then wait
  const held = (await heap()) - before;
  const bystander = await timed(`${server.httpUrl}/healthz`);
  for (const socket of sockets) socket.destroy();
  await sleep(500);
  const after = await timed(`${server.httpUrl}/healthz`);
  await stop();
  report(
    `inspector feeds (${streams.toLocaleString('en')} streams, ~${mib(streams * 290)} of list; ${readers} readers that never read)`,
    '9.3 MB held per idle reader at 50,000 streams; 300 readers took +2.1 GB in 20 s; 1,000 peaked at 4.5 GB and stalled HTTP requests 45-75 s after they closed (at this scale on main: 100 x 200, JS heap +2216.4 MiB, 22.2 MiB a reader)',
    `answers ${tally(statuses)}; JS heap ${signed(held)} with them open (${mib(held / Math.max(1, statuses.filter((s) => s === 200).length))} a reader); a bystander's /healthz ${ms(bystander)} with them open, ${ms(after)} after they closed`,
    26,
  );
}

/** Time travel on a stream of 20,000 runes (a snapshot every 1,000): at its head, then twice far before it. */
async function timeTravel(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-attack-inspector-'));
  const store = sqliteStore(join(dir, 'travel.db'));
  const engine = createEngine({ store });
  const runes = 20_000;
  await engine.spawn('long', 'chat-actor');
  for (let seq = 2; seq <= runes; seq += 500) await Promise.all(Array.from({ length: Math.min(500, runes + 1 - seq) }, () => engine.dispatch('long', { type: 'Ping' })));
  for (let i = 0; i < 100 && (await store.latestSnapshot('long'))?.seq !== runes; i++) await sleep(50);
  // The inspector reads through this: the runes it reads are counted.
  const { store: counting, counted } = countingStore(store);
  const { server, stop } = await serve({ inspector: { store: counting } }, engine);
  const at = async (seq: number) => {
    counted.runes = 0;
    const took = await timed(`${server.httpUrl}/inspector/api/streams/long/state?seq=${seq}`);
    return `${ms(took)}, ${counted.runes.toLocaleString('en')} runes read`;
  };
  const head = await at(runes);
  const firstFar = await at(10_500);
  const againFar = await at(10_500);
  await stop();
  rmSync(dir, { recursive: true, force: true });
  report(
    `inspector time travel (a stream of ${runes.toLocaleString('en')} runes, a snapshot every 1,000)`,
    '11-12 s a request to seq 100,000, folded from seq 1 every time (at this scale on main: seq 20,000 read 20,001 runes, 95 ms)',
    `seq ${runes.toLocaleString('en')} (its snapshot): ${head}; seq 10,500: ${firstFar} the first time (from seq 1), ${againFar} the next (from the state kept at 10,000)`,
    26,
  );
}

/** A page on another origin frames the inspector: what the page's headers say. */
async function framing(): Promise<void> {
  const store = sqliteStore(join(mkdtempSync(join(tmpdir(), 'runestream-attack-inspector-')), 'framing.db'));
  const { server, stop } = await serve({ inspector: { store } }, createEngine({ store }));
  const headers = await new Promise<Record<string, unknown>>((resolve) =>
    get(`${server.httpUrl}/`, (response) => {
      response.resume();
      resolve(response.headers);
    }),
  );
  await stop();
  const policy = String(headers['content-security-policy']);
  report(
    'inspector framing (GET / from a page that would frame it)',
    "no frame-ancestors or X-Frame-Options: one click on a framing page approved a pending call; connect-src 'self' ws: wss:",
    `X-Frame-Options: ${String(headers['x-frame-options'])}; ${/frame-ancestors [^;]+/.exec(policy)?.[0]}; ${/connect-src [^;]+/.exec(policy)?.[0]}`,
    26,
  );
}

export const attacks: Record<string, () => Promise<void>> = {
  'inspector-feeds': feeds,
  'inspector-time-travel': timeTravel,
  'inspector-framing': framing,
};
