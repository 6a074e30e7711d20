import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { logServing } from '../../src/cli/serve-log.js';
import { createEngine, type Engine, type EngineError } from '../../src/index.js';
import { archivalEpic } from '../../src/effects/archival/archival-epic.js';
import { archiveTarget } from '../../src/effects/archival/archival-requests.js';
import { fsColdStore } from '../../src/streams/archive/fs-cold-store.js';
import { readManifest } from '../../src/streams/archive/read-archive.js';
import { sqliteStore } from '../../src/streams/sqlite-store.js';
import { conversationWithTurns } from '../support/archival-conversation.js';
import { SseClient } from '../support/sse-client.js';
import { startServer } from '../support/ws-client.js';

const dir = mkdtempSync(join(tmpdir(), 'runestream-damaged-data-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

/** The serve log, as `runestream serve` keeps it (JSON lines), into memory. */
function serveLog(engine: Engine): Record<string, unknown>[] {
  const log: Record<string, unknown>[] = [];
  const sink = new Writable({ write: (chunk: Buffer, _encoding, done) => done(void log.push(JSON.parse(String(chunk)) as Record<string, unknown>)) });
  cleanup.push(logServing(engine, pino({ name: 'runestream' }, sink)));
  return log;
}

/**
 * A served engine on a real SQLite file whose conversation `conv/c1` was archived to a folder and
 * pruned, then one bit of its segment flipped on disk: the damaged archive.
 */
async function damagedArchive(name: string) {
  const store = sqliteStore(join(dir, `${name}.db`));
  const cold = fsColdStore(join(dir, `${name}-cold`));
  const engine = createEngine({ store, archive: cold, epics: [archivalEpic({ store, cold })] });
  const errors: EngineError[] = [];
  engine.errors$.subscribe((error) => errors.push(error));
  const log = serveLog(engine);
  await conversationWithTurns(engine, 'c1', 30);
  expect(await archiveTarget({ engine, store, cold }, 'conv/c1')).toMatchObject({ outcome: 'archived' });
  const segment = (await readManifest(cold, 'conv/c1'))!.segments[0]!;
  const bytes = (await cold.get(segment.key))!;
  bytes[Math.floor(bytes.length / 2)]! ^= 0x04; // one bit
  await cold.put(segment.key, bytes);
  const h = await startServer({ engine, heartbeatMs: 0 });
  cleanup.push(h.stop);
  return { h, errors, segment, log };
}

describe('a damaged archive is never served as pruned history', () => {
  it('a WebSocket subscriber replaying from seq 0 gets an error checksum_mismatch naming the segment, and no rune or snapshot; errors$ reports it', async () => {
    const { h, errors, segment, log } = await damagedArchive('ws');
    const client = await h.connect();
    client.send({ op: 'subscribe', stream: 'conv/c1', afterSeq: 0 });
    const error = await client.next((m) => m.op === 'error' || m.op === 'rune' || m.op === 'snapshot', 'the first answer');
    expect(error).toMatchObject({ op: 'error', stream: 'conv/c1', code: 'checksum_mismatch', message: expect.stringContaining(segment.key) });
    expect(client.messages.filter((m) => m.op === 'rune' || m.op === 'snapshot')).toEqual([]);
    expect(errors).toEqual([expect.objectContaining({ type: 'archive_damaged', stream: 'conv/c1', error: expect.objectContaining({ code: 'checksum_mismatch' }) })]);
    expect(log).toEqual([
      expect.objectContaining({ level: 50, type: 'archive_damaged', stream: 'conv/c1', code: 'checksum_mismatch', msg: expect.stringContaining(segment.key) }),
    ]);
    // The connection carries on: a stream whose archive is sound is still served.
    client.send({ op: 'subscribe', stream: 'conv/c1/agent/a1' });
    expect(await client.next((m) => m.op === 'snapshot', 'a snapshot')).toMatchObject({ stream: 'conv/c1/agent/a1', seq: 2 });
  });

  it('an SSE reader resuming from Last-Event-ID 0 gets an error event checksum_mismatch naming the segment, then the response ends', async () => {
    const { h, errors, segment } = await damagedArchive('sse');
    const sse = await SseClient.open(`${h.server.httpUrl}/streams/conv%2Fc1/events?lastEventId=0`);
    cleanup.push(() => sse.close());
    expect(sse.response.statusCode).toBe(200);
    await sse.ended;
    expect(sse.events).toEqual([{ kind: 'event', event: 'error', id: undefined, data: { code: 'checksum_mismatch', message: expect.stringContaining(segment.key) } }]);
    expect(errors.map((e) => e.type)).toEqual(['archive_damaged']);
  });
});

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';

describe('a stored rune off its hash chain (D11)', () => {
  it('refuses its stream to a subscriber and a dispatch with chain_broken naming the seq, logs it; other streams on the same connection carry on', async () => {
    const path = join(dir, 'chain.db');
    const writer = createEngine({ store: sqliteStore(path) });
    for (const stream of ['chat-a', 'chat-b']) {
      await writer.spawn(stream, 'chat-actor');
      for (let n = 1; n <= 10; n++) await writer.dispatch(stream, n % 2 === 1 ? { type: 'Pause', reason: `${stream}-mark-${n}` } : { type: 'ProcessInteraction', userId });
    }
    await writer.close();
    // One character of one rune, changed on disk (its page stays sound: quick_check passes).
    const bytes = readFileSync(path);
    const at = bytes.indexOf('chat-b-mark-5', 0, 'utf8');
    expect(at).toBeGreaterThan(0);
    bytes.write('chat-b-mark-7', at, 'utf8');
    writeFileSync(path, bytes);

    const engine = createEngine({ store: sqliteStore(path) });
    const errors: EngineError[] = [];
    engine.errors$.subscribe((error) => errors.push(error));
    const log = serveLog(engine);
    const h = await startServer({ engine, heartbeatMs: 0 });
    cleanup.push(h.stop);
    const client = await h.connect();

    client.send({ op: 'subscribe', stream: 'chat-b' });
    const refused = await client.next((m) => m.op === 'error' || m.op === 'snapshot', 'the first answer');
    expect(refused).toMatchObject({
      op: 'error',
      stream: 'chat-b',
      code: 'chain_broken',
      message: expect.stringContaining('stream "chat-b": rune 6 does not match its hash chain'),
    });
    expect(await client.request({ op: 'dispatch', id: 1, stream: 'chat-b', event: { type: 'Ping' } })).toMatchObject({ op: 'error', id: 1, code: 'chain_broken' });

    client.send({ op: 'subscribe', stream: 'chat-a' });
    expect(await client.next((m) => (m.op === 'snapshot' || m.op === 'error') && m.stream === 'chat-a', 'chat-a')).toMatchObject({
      op: 'snapshot',
      stream: 'chat-a',
      seq: 11,
    });
    expect(await client.request({ op: 'dispatch', id: 2, stream: 'chat-a', event: { type: 'Ping' } })).toMatchObject({ op: 'ack', id: 2, seq: 12 });

    expect(errors.length).toBeGreaterThan(0);
    expect(errors.every((e) => e.type === 'stream_corrupt' && e.stream === 'chat-b')).toBe(true);
    expect(log[0]).toMatchObject({ level: 50, type: 'stream_corrupt', stream: 'chat-b', code: 'chain_broken', msg: expect.stringContaining('rune 6 ') });
  });
});
