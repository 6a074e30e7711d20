/**
 * Replays the attacks of issue 10 (round one, here) and issue 26 (round two, in `scripts/attacks/`)
 * against real servers on 127.0.0.1 and prints, per attack, the figure the issue measured on main
 * before the fixes and the figure measured now.
 *
 *   npx tsx scripts/attacks.ts [names...]      (node --expose-gc --import tsx for exact RSS figures)
 *
 * Round one: origin, nesting, amplification, unfinished, per-connection, sse-resume, two-writers,
 * heartbeat, small. Round two: registration-frame, registration-restart, nul, ag-ui-error,
 * ws-invalid-frame, held-bodies, metric-labels, oversized-result, mcp-100mb, mcp-crash,
 * inspector-feeds, inspector-time-travel, inspector-framing, cli-sessions, cli-sessions-total,
 * cli-log-flood, archive-bit-flip, sqlite-page-corruption, wal-bit-flip. Every loop is bounded and every wait has a
 * deadline, so it stops by itself.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { get } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VirtualTimeScheduler } from 'rxjs';
import { WebSocket } from 'ws';
import { chatActorLifecycle, createEngine, type Rune } from '../src/index.js';
import { SERVER_CHANNELS } from '../src/server/index.js';
import { sqliteStore } from '../src/sqlite.js';
import { attacks as cliAttacks } from './attacks/cli.js';
import { attacks as inspectorAttacks } from './attacks/inspector.js';
import { attacks as integrityAttacks } from './attacks/integrity.js';
import { Client, MiB, heap, mib, ms, pipelinedBeside, report, rss, serve, signed, sleep, tally, turn, userId } from './attacks/kit.js';
import { attacks as nulAttacks } from './attacks/nul.js';
import { attacks as registrationAttacks } from './attacks/registration.js';
import { attacks as routesAttacks } from './attacks/routes.js';
import { attacks as toolResultAttacks } from './attacks/tool-results.js';

/** 1. A page on another origin upgrades and tries to spawn. */
async function origin(): Promise<void> {
  const { engine, server, stop } = await serve();
  const ws = new WebSocket(server.url, { origin: 'http://evil.example' });
  ws.on('error', () => undefined);
  ws.on('open', () => ws.send(JSON.stringify({ op: 'spawn', id: 1, stream: 'hijacked', machine: 'chat-actor' })));
  const outcome = await Promise.race([
    once(ws, 'unexpected-response').then(([, response]) => `HTTP ${(response as { statusCode: number }).statusCode}`),
    once(ws, 'open').then(() => 'HTTP 101 (upgraded)'),
  ]);
  ws.terminate();
  await turn();
  const applied = (await engine.snapshot('hijacked')) !== undefined;
  await stop();
  report(
    '1. cross-site WebSocket (Origin: http://evil.example, no token)',
    'accepted: a foreign page spawned, drove the agent and approved save_note',
    `${outcome}; spawn applied: ${applied ? 'yes' : 'no'}`,
  );
}

/** 2. A tool-call spawned with arguments nested 1,200 levels. */
async function nesting(): Promise<void> {
  const { engine, server, stop } = await serve();
  let nested: unknown = 'leaf';
  for (let i = 0; i < 1200; i++) nested = { a: nested };
  const c = await Client.open(server.url);
  c.send({ op: 'spawn', id: 1, stream: 'deep', machine: 'tool-call', input: { callId: 'c1', toolName: 'clock', arguments: nested } });
  const answer = await c.find((m) => m.id === 1);
  const stored = (await engine.snapshot('deep')) !== undefined;
  c.ws.close();
  await stop();
  const m = answer?.message;
  report(
    '2. nesting (tool-call arguments 1,200 levels deep)',
    'acked, then every request on the stream failed with "malformed JSON" once it left memory',
    `${m?.op ?? 'no answer'} ${m?.code ?? ''} (${m?.message?.slice(0, 90) ?? ''}); stored: ${stored ? 'yes' : 'no'}`,
  );
}

/** 3. ~1 MiB dispatches of wrong array elements, alone and from 4 pipelining attackers. */
async function amplification(): Promise<void> {
  const { engine, server, stop } = await serve({ maxFrameBytes: 2 * MiB, maxPayloadBytes: 2 * MiB, maxInboundBytes: 64 * MiB });
  await engine.spawn('turn', 'turn-engine');
  await engine.spawn('bystander', 'chat-actor');
  // 10,000 numbers (strings are expected), each padded with JSON whitespace: one zod issue each.
  const callIds = Array.from({ length: 10_000 }, (_, i) => `${' '.repeat(96)}${i}`).join(',');
  const frame = (id: number) => `{"op":"dispatch","id":${id},"stream":"turn","event":{"type":"tool_calls_received","callIds":[${callIds}]}}`;
  const frameBytes = Buffer.byteLength(frame(1));

  const single = await Client.open(server.url);
  const sentAt = performance.now();
  single.send(frame(1));
  const error = await single.find((m) => m.id === 1);
  single.ws.close();

  const { ack, ackMs, attackerAnswersBefore } = await pipelinedBeside(server.url, frame, 'bystander');
  await stop();
  report(
    `3. error amplification (${mib(frameBytes)} dispatch, 10,000 wrong callIds; maxFrameBytes/maxPayloadBytes 2 MiB)`,
    'a 65 MB invalid_event, 7.5-10.8 s of blocked event loop, RSS ~2.4 GB; 4 attackers stalled a bystander 29 s',
    `${error?.message.code ?? 'no answer'} of ${error === undefined ? '?' : `${error.bytes} bytes`}, answered in ${error === undefined ? '?' : ms(error.at - sentAt)}; ` +
      `4 attackers x 10 frames: bystander's Ping ${ack?.message.op ?? 'no answer'} in ${ackMs === undefined ? '?' : ms(ackMs)} ` +
      `(${attackerAnswersBefore} of 40 attacker errors answered before it)`,
  );
}

/** 4. Connections holding unfinished fragmented messages; then half-open TCP sockets. */
async function unfinished(): Promise<void> {
  const connections = 100;
  const { server, stop } = await serve();
  const before = await rss();
  const buffersBefore = process.memoryUsage().arrayBuffers;
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
  const fragment = Buffer.alloc(64 * 1024, 'x');
  const clients = await Promise.all(Array.from({ length: connections }, () => Client.open(server.url)));
  // Each sends up to 15 MiB of one message in 64 KiB fragments, waiting for each write (pings are answered by ws).
  await Promise.all(
    clients.map(async (c) => {
      for (let sent = 0; sent < 15 * MiB && c.ws.readyState === WebSocket.OPEN; sent += fragment.length) {
        await new Promise<void>((resolve) => c.ws.send(fragment, { fin: false, binary: false }, () => resolve()));
      }
    }),
  );
  const codes = await Promise.all(clients.map((c) => Promise.race([c.closed, sleep(15_000).then(() => 'still open')])));
  clearInterval(sampler);
  const after = await rss();
  const buffersAfter = process.memoryUsage().arrayBuffers;
  await stop();
  report(
    `4a. unfinished messages (${connections} connections x 15 MiB in 64 KiB fragments; the issue had 400)`,
    '+6.0 GB pinned indefinitely',
    `closed: ${tally(codes)}; RSS ${mib(before)} -> ${mib(after)} (${signed(after - before)}; peak ${mib(peak)}); Buffers held ${mib(buffersBefore)} -> ${mib(buffersAfter)}${gc === undefined ? ' [no --expose-gc]' : ''}`,
  );

  const halfOpen = await serve(); // default handshakeTimeoutMs (10 s)
  const started = performance.now();
  let lastClosed = started;
  const sockets: Socket[] = [];
  const allClosed = Promise.all(
    Array.from({ length: 1000 }, () => {
      const socket = connect(halfOpen.server.port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.resume(); // reads the server's 408, so its end closes this socket too
      sockets.push(socket);
      return once(socket, 'close').then(() => (lastClosed = performance.now()));
    }),
  );
  const done = await Promise.race([allClosed.then(() => true), sleep(30_000).then(() => false)]);
  const open = sockets.filter((s) => !s.destroyed).length;
  for (const s of sockets) s.destroy();
  await halfOpen.stop();
  report(
    '4b. half-open sockets (1,000 TCP connections sending nothing, default handshakeTimeoutMs 10 s)',
    'stayed open 72 s+',
    done ? `all 1,000 closed ${ms(lastClosed - started)} after connecting` : `${open} of 1,000 still open after 30 s`,
  );
}

/** 5. Per-connection limits: subscriptions, and requests queued behind an async hook. */
async function perConnection(): Promise<void> {
  await subscriptions();
  await requestsInFlight(); // after the first has returned, so its 50,000 streams are garbage
}

async function subscriptions(): Promise<void> {
  const streams = 50_000;
  const { engine, server, stop } = await serve();
  for (let i = 0; i < streams; i++) await engine.spawn(`s${i}`, 'chat-actor');
  const heapSpawned = await heap();
  const c = await Client.open(server.url, {}, false);
  for (let i = 0; i < streams; i++) c.send({ op: 'subscribe', stream: `s${i}` });
  const answered = () => c.answered;
  const complete = await c.until(() => answered() === streams, 60_000);
  const outcomes = [...c.tallies].map(([key, n]) => `${n} x ${key}`).join(', ');
  const heapSubscribed = await heap();
  c.ws.close();
  await stop();
  report(
    '5a. one connection subscribing to 50,000 streams (default maxSubscriptions)',
    '50,000 accepted (+200 MB)',
    `${outcomes}${complete ? '' : ` (only ${answered()} answered within 1 min)`}; heap ${signed(heapSubscribed - heapSpawned)} while subscribed (the 50,000 spawned streams not counted)`,
  );
}

async function requestsInFlight(): Promise<void> {
  let hookCalls = 0;
  const held = await serve({ authorize: () => (hookCalls++, new Promise<boolean>(() => undefined)) });
  await held.engine.spawn('chat', 'chat-actor');
  const requests = 200_000;
  const heapBefore = await heap();
  const q = await Client.open(held.server.url, {}, false);
  for (let i = 0; i < requests; i++) q.send({ op: 'subscribe', stream: 'chat' });
  const refused = () => q.count('too_many_requests');
  // All but those held in flight are refused at once: wait for that many, or 60 s.
  await q.until(() => refused() + hookCalls >= requests, 60_000);
  const refusedCount = refused();
  const callsBeforeClose = hookCalls;
  const heapConnected = await heap();
  q.ws.close();
  await q.closed;
  const callsAtClose = hookCalls;
  await sleep(1000);
  const callsAfter = hookCalls - callsAtClose;
  await held.stop();
  report(
    '5b. 200,000 subscribes behind an authorize hook that never answers, then close',
    'RSS 378 MB; the hook still called 52 times a second after the client left',
    `${refusedCount} refused too_many_requests, hook called ${callsBeforeClose} time(s) while connected, heap ${mib(heapBefore)} -> ${mib(heapConnected)} (${signed(heapConnected - heapBefore)}, server and client); ${callsAfter} calls in the 1 s after the client left`,
  );
}

/** 6. An SSE resume from the start of a 20,000-rune chat actor. */
async function sseResume(): Promise<void> {
  const { engine, server, stop } = await serve();
  await engine.spawn('long', 'chat-actor');
  const runes = 20_000;
  for (let i = 0; i < runes; i++) {
    await engine.dispatch('long', i % 2 === 0 ? { type: 'ProcessInteraction', userId } : { type: 'Pause', reason: 'a' });
  }
  let events = 0;
  let partial = '';
  await new Promise<void>((resolve) => {
    const request = get(`${server.httpUrl}/streams/long/events?lastEventId=0`, (response) => {
      let idle = setTimeout(finish, 5000);
      function finish() {
        clearTimeout(idle);
        request.destroy();
        resolve();
      }
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop()!; // a line not finished yet is counted with the next chunk
        events += lines.filter((line) => line.startsWith('id: ')).length;
        clearTimeout(idle);
        if (events >= runes) finish();
        else idle = setTimeout(finish, 5000); // no byte for 5 s: the replay is over
      });
      response.on('end', finish);
    });
    request.on('error', () => resolve());
  });
  await stop();
  report(
    '6. SSE resume (lastEventId=0 on a 20,000-rune chat actor, default maxBufferedBytes)',
    'an empty reply every time (replay cut as a slow client)',
    `${events} of ${runes} events arrived`,
  );
}

/** 7. Two stores (two servers) on one SQLite file. */
async function twoWriters(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-attacks-'));
  const path = join(dir, 'log.db');
  const first = sqliteStore(path);
  let outcome: string;
  try {
    const second = sqliteStore(path);
    await second.close();
    outcome = 'the second open succeeded';
  } catch (error) {
    const e = error as { code?: string; message: string };
    outcome = `refused: ${e.code ?? 'no code'} (${e.message.slice(0, 300)})`;
  }
  await first.close();
  rmSync(dir, { recursive: true, force: true });
  report('7. two writers on one SQLite file (the second sqliteStore open)', "76 of 200 dispatches failed naming another client's streams", outcome);
}

/** 8. 20,000 running chat actors through one hour of virtual time. */
async function heartbeat(): Promise<void> {
  const actors = 20_000;
  const hour = 60 * 60_000;
  const scheduler = new VirtualTimeScheduler(undefined, hour);
  const engine = createEngine({ scheduler, epics: [chatActorLifecycle()] });
  await turn(); // epics start on the next microtask
  for (let i = 0; i < actors; i++) {
    await engine.spawn(`chat-${i}`, 'chat-actor');
    await engine.dispatch(`chat-${i}`, { type: 'ProcessInteraction', userId });
  }
  const appended: Rune[] = [];
  engine.runes$().subscribe((r) => appended.push(r));
  // One due time at a time, letting the engine commit what each tick dispatched.
  for (let next = scheduler.actions[0]?.delay; next !== undefined && next <= hour; next = scheduler.actions[0]?.delay) {
    scheduler.maxFrames = next;
    scheduler.flush();
    await turn();
  }
  const lastHalf = appended.filter((r) => r.at > hour / 2).length;
  await engine.close();
  report(
    '8. 20,000 running chat actors, 1 hour of virtual time (chatActorLifecycle defaults)',
    '603 Ping runes a second, forever',
    `${appended.length} runes in the hour = ${(appended.length / 3600).toFixed(1)}/s (${tally(appended.map((r) => r.kind))}); ${lastHalf} in its second half-hour`,
  );
}

/** 9. Small ones: a prototype machine name, a lone surrogate stream id, a slow client's close. */
async function small(): Promise<void> {
  const { server, stop } = await serve();
  const c = await Client.open(server.url);
  c.send({ op: 'spawn', id: 1, stream: 'x', machine: 'constructor' });
  c.send('{"op":"spawn","id":2,"stream":"\\ud800","machine":"chat-actor"}');
  const ctor = await c.find((m) => m.id === 1);
  const surrogate = await c.find((m) => m.id === 2);
  c.ws.close();
  await stop();
  report('9a. spawn machine "constructor"', 'internal (a TypeError)', `${ctor?.message.code ?? 'no answer'}`);
  report(
    '9b. stream id "\\ud800" (lone surrogate)',
    'stored as invalid UTF-8: heads() listed an id head() could not find',
    `${surrogate?.message.code ?? 'no answer'} (${surrogate?.message.message?.slice(0, 120) ?? ''})`,
  );

  const slow = await serve({ slowClient: 'close', maxBufferedBytes: 16 * 1024 });
  await slow.engine.spawn('busy', 'chat-actor');
  const reader = await Client.open(slow.server.url);
  reader.send({ op: 'subscribe', stream: 'busy' });
  await reader.find((m) => m.op === 'snapshot');
  reader.ws.pause(); // never reads: the kernel's buffers fill, then the server's
  let reported = false;
  const onSlow = () => (reported = true);
  subscribe(SERVER_CHANNELS.slowClient, onSlow);
  const reason = 'r'.repeat(4096);
  let dispatched = 0;
  for (; dispatched < 20_000 && !reported; dispatched++) {
    await slow.engine.dispatch('busy', dispatched % 2 === 0 ? { type: 'Pause', reason } : { type: 'ProcessInteraction', userId });
    await turn();
  }
  unsubscribe(SERVER_CHANNELS.slowClient, onSlow);
  reader.ws.resume();
  const code = await Promise.race([reader.closed, sleep(10_000).then(() => 'not closed within 10 s')]);
  await slow.stop();
  report(
    '9c. slow client (never reads; slowClient close, maxBufferedBytes 16 KiB, subscribed to a busy stream)',
    'closed with no close frame (1006)',
    `close code ${code} after ${dispatched} runes of ~4 KiB`,
  );
}

const attacks: Record<string, () => Promise<void>> = {
  origin,
  nesting,
  amplification,
  unfinished,
  'per-connection': perConnection,
  'sse-resume': sseResume,
  'two-writers': twoWriters,
  heartbeat,
  small,
  // Round two (issue 26), in the issue's order.
  ...registrationAttacks,
  ...nulAttacks,
  ...routesAttacks,
  ...toolResultAttacks,
  ...inspectorAttacks,
  ...cliAttacks,
  ...integrityAttacks,
};

const chosen = process.argv.slice(2);
for (const name of chosen) if (!(name in attacks)) throw new Error(`unknown attack "${name}"; the attacks are ${Object.keys(attacks).join(', ')}`);
const started = performance.now();
for (const [name, attack] of Object.entries(attacks)) {
  if (chosen.length > 0 && !chosen.includes(name)) continue;
  try {
    await attack();
  } catch (error) {
    console.log(`${name}: failed: ${error instanceof Error ? error.stack : String(error)}`);
  }
}
console.log(`(all run in ${ms(performance.now() - started)})`);
