/**
 * Issue 26, items 7 and 9 (D11): damaged data. Each attack damages real files the way a disk does
 * (one flipped bit, overwritten bytes), then reads them back through a real server on 127.0.0.1
 * and tallies what a client is served: the runes as written, altered ones, fewer, or a refusal
 * with a code. Seeded, bounded, each well under a minute.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createEngine, type Rune } from '../../src/index.js';
import { archivalEpic } from '../../src/effects/archival/archival-epic.js';
import { archiveTarget } from '../../src/effects/archival/archival-requests.js';
import { fsColdStore } from '../../src/streams/archive/fs-cold-store.js';
import { readManifest } from '../../src/streams/archive/read-archive.js';
import { sqliteStore } from '../../src/streams/sqlite-store.js';
import { seededRandom as random } from '../../test/support/seeded-random.js';
import { Client, report, serve, tally, userId } from './kit.js';

/** Every rune of `stream` a WebSocket subscriber replaying from seq 0 is sent, or the error that ended it (within `ms`). */
async function replayOver(url: string, stream: string, last: number, ms = 10_000): Promise<{ runes: Rune[]; snapshot: boolean; error?: string }> {
  const client = await Client.open(url);
  try {
    client.send({ op: 'subscribe', stream, afterSeq: 0 });
    const runeAt = (m: { op: string; rune?: Rune }) => m.op === 'rune' && (m.rune?.seq ?? 0) >= last;
    await client.find((m) => m.op === 'error' || m.op === 'snapshot' || runeAt(m as { op: string; rune?: Rune }), ms);
    const messages = client.received.map((r) => r.message as { op: string; rune?: Rune; code?: string });
    return {
      runes: messages.flatMap((m) => (m.op === 'rune' && m.rune !== undefined ? [m.rune] : [])),
      snapshot: messages.some((m) => m.op === 'snapshot'),
      ...(messages.find((m) => m.op === 'error')?.code === undefined ? {} : { error: messages.find((m) => m.op === 'error')!.code! }),
    };
  } finally {
    client.ws.terminate();
  }
}

/** The SSE events of a replay from Last-Event-ID 0, until the response ends or `ms` pass. */
function sseReplay(url: string, ms = 3_000): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const events: string[] = [];
    const req = get(url, { headers: { 'last-event-id': '0' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      const done = () => {
        clearTimeout(timer);
        for (const block of text.split('\n\n')) {
          const event = /^event: (.*)$/m.exec(block)?.[1];
          if (event !== undefined) events.push(event === 'error' ? `error ${String((JSON.parse(/^data: (.*)$/m.exec(block)![1]!) as { code: string }).code)}` : event);
        }
        resolve(events);
      };
      const timer = setTimeout(() => {
        res.destroy();
        done();
      }, ms);
      res.on('end', done);
    });
    req.on('error', reject);
  });
}

/** 7: one flipped bit in an archived stream's segment, then a subscriber and an SSE reader replay it. */
async function archiveBitFlip(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-attack-archive-'));
  try {
    const store = sqliteStore(join(dir, 'log.db'));
    const cold = fsColdStore(join(dir, 'cold'));
    const engine = createEngine({ store, archive: cold, epics: [archivalEpic({ store, cold })] });
    const logged: string[] = [];
    engine.errors$.subscribe((error) => logged.push(error.type));
    const conv = 'conv/c1';
    await engine.spawn(conv, 'conversation', { conversationId: 'c1' });
    await engine.dispatch(conv, { type: 'first_message' });
    for (let i = 0; i < 500; i++) {
      await engine.dispatch(conv, { type: 'new_turn' });
      await engine.dispatch(conv, { type: 'turn_completed' });
    }
    await engine.dispatch(conv, { type: 'close_requested', reason: 'done' });
    await engine.dispatch(conv, { type: 'cleanup_complete' });
    const outcome = await archiveTarget({ engine, store, cold }, conv);
    if (outcome.outcome !== 'archived') throw new Error(`not archived: ${JSON.stringify(outcome)}`);
    const manifest = (await readManifest(cold, conv))!;
    const segment = manifest.segments.at(-1)!;
    const bytes = (await cold.get(segment.key))!;
    bytes[Math.floor(bytes.length / 2)]! ^= 0x08;
    await cold.put(segment.key, bytes);

    const { server, stop } = await serve({}, engine);
    try {
      const ws = await replayOver(server.url, conv, manifest.seq);
      const sse = await sseReplay(`${server.httpUrl}/streams/${encodeURIComponent(conv)}/events`);
      report(
        '7. a damaged archive (one bit flipped in a segment of a 1,004-rune archived conversation), replayed from seq 0',
        'a subscriber got runes 1..1000 then a snapshot, an SSE replay 2 events, no error, no log line',
        `WebSocket: ${ws.runes.length} runes${ws.snapshot ? ', a snapshot' : ''}, error ${ws.error ?? 'none'}; SSE: ${tally(sse)}; reported: ${tally(logged)}`,
        26,
      );
    } finally {
      await stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const STREAMS = 200;
const RUNES = 20;

/** Writes STREAMS chat actors of RUNES runes each to a new file; returns what each stream holds. */
async function writeStreams(path: string): Promise<Map<string, Rune[]>> {
  const engine = createEngine({ store: sqliteStore(path) });
  for (let s = 0; s < STREAMS; s++) {
    await engine.spawn(`chat-${s}`, 'chat-actor');
    for (let n = 2; n <= RUNES; n++) await engine.dispatch(`chat-${s}`, n % 2 === 0 ? { type: 'Pause', reason: `note ${s}/${n}` } : { type: 'ProcessInteraction', userId });
  }
  await engine.close();
  const store = sqliteStore(path);
  const written = new Map<string, Rune[]>();
  for (let s = 0; s < STREAMS; s++) written.set(`chat-${s}`, await store.read(`chat-${s}`));
  await store.close();
  return written;
}

/**
 * Serves the file and replays every stream through a WebSocket subscriber: how many came back as
 * written, altered, cut short, or refused (by code). A file refused at open is one outcome.
 */
async function servedFrom(path: string, written: Map<string, Rune[]>): Promise<string[]> {
  let store;
  try {
    store = sqliteStore(path);
  } catch (error) {
    return [`file refused ${(error as { code?: string }).code ?? 'unknown'}`];
  }
  const { server, stop } = await serve({}, createEngine({ store }));
  const outcomes: string[] = [];
  try {
    for (const [stream, runes] of written) {
      const got = await replayOver(server.url, stream, runes.length, 2_000);
      if (got.error !== undefined) outcomes.push(`refused ${got.error}`);
      else if (got.runes.length < runes.length) outcomes.push('cut short');
      else outcomes.push(JSON.stringify(got.runes.slice(0, runes.length)) === JSON.stringify(runes) ? 'as written' : 'ALTERED');
    }
  } finally {
    await stop();
  }
  const altered = outcomes.filter((o) => o === 'ALTERED').length;
  return altered === 0 ? outcomes : [...outcomes, `(${altered} altered)`];
}

/** 9: bytes of a closed SQLite file's pages overwritten (as a failing disk would), then every stream served. */
async function sqlitePageCorruption(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-attack-pages-'));
  try {
    const clean = join(dir, 'clean.db');
    const written = await writeStreams(clean);
    const pristine = readFileSync(clean);
    const results: string[] = [];
    const next = random(26);
    for (let trial = 0; trial < 4; trial++) {
      const path = join(dir, `damaged-${trial}.db`);
      const bytes = Buffer.from(pristine);
      // Ten flipped bits anywhere past the header page: in records, in cell pointers, in free space.
      for (let i = 0; i < 10; i++) bytes[4096 + Math.floor(next() * (bytes.length - 4096))]! ^= 1 << Math.floor(next() * 8);
      writeFileSync(path, bytes);
      results.push(...(await servedFrom(path, written)).filter((o) => o !== 'as written'));
    }
    // One character of one rune's text changed, its page otherwise sound: what quick_check cannot see.
    const path = join(dir, 'altered-text.db');
    const bytes = Buffer.from(pristine);
    const at = bytes.indexOf('note 17/8', 0, 'utf8');
    bytes.write('note 17/6', at, 'utf8');
    writeFileSync(path, bytes);
    const text = (await servedFrom(path, written)).filter((o) => o !== 'as written');
    report(
      `9b. SQLite page corruption (a ${STREAMS}-stream file: 4 copies with 10 random bit flips each, 1 with one character of a rune changed), every stream replayed`,
      '3 of 200 streams served altered data silently',
      `bit flips: ${tally(results)}; changed character: ${tally(text)}; streams not listed were served as written`,
      26,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** 9 (D11): a writer acks 101 runes and is killed; one bit of its WAL flipped; the file opened and the stream served. */
async function walBitFlip(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-attack-wal-'));
  try {
    const outcomes: string[] = [];
    const next = random(11);
    for (let run = 0; run < 3; run++) {
      const path = join(dir, `crashed-${run}.db`);
      const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'test/fixtures/sqlite-acked-writer.ts', path, '101']).catch(
        (error: { stdout: string }) => error,
      );
      if (stdout !== 'acked 101\n') throw new Error(`the writer said ${JSON.stringify(stdout)}`);
      const wal = readFileSync(`${path}-wal`);
      wal[32 + Math.floor(next() * (wal.length - 32))]! ^= 1 << Math.floor(next() * 8);
      writeFileSync(`${path}-wal`, wal);
      let store;
      try {
        store = sqliteStore(path);
      } catch (error) {
        outcomes.push(`refused ${(error as { code?: string }).code ?? 'unknown'}`);
        continue;
      }
      const { server, stop } = await serve({}, createEngine({ store }));
      try {
        const got = await replayOver(server.url, 's', 101, 2_000);
        outcomes.push(got.error === undefined ? `${101 - got.runes.length} of 101 lost silently` : `refused ${got.error}`);
      } finally {
        await stop();
      }
    }
    report('9d (D11). a WAL bit flip after a writer acked 101 runes and was killed (three runs)', '90, 48 and 10 of 101 acked runes lost silently', outcomes.join('; '), 26);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export const attacks: Record<string, () => Promise<void>> = {
  'archive-bit-flip': archiveBitFlip,
  'sqlite-page-corruption': sqlitePageCorruption,
  'wal-bit-flip': walBitFlip,
};
