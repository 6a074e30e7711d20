import { mkdtempSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { Rune } from '../src/index.js';
import { fsColdStore } from '../src/streams/archive/fs-cold-store.js';
import { storeRunePages } from '../src/streams/archive/store-rune-pages.js';
import { writeArchive } from '../src/streams/archive/write-archive.js';
import { sqliteStore } from '../src/streams/sqlite-store.js';
import type { RuneStore } from '../src/streams/store.js';
import { compareAsync, measureAsync, report } from './harness.js';

const RUNES = 20_000;
const PAGE = 1000;
const STREAM = 'conv/7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21/agent/a1';
const BAR = 0.7;
const gzipAsync = promisify(gzip);

/** The stream's runes: a spawn, then model deltas and tool calls, as an agent's log holds them. */
function agentRunes(): Rune[] {
  return Array.from({ length: RUNES }, (_, i): Rune => {
    const seq = i + 1;
    const event =
      seq === 1
        ? { type: 'spawn', input: { model: 'gpt-4o-mini', system: 'You are a careful assistant.' } }
        : seq % 10 === 0
          ? { type: 'tool_result', callId: `call_${seq}`, status: 'ok', output: { path: `src/file-${seq}.ts`, bytes: seq * 7 } }
          : { type: 'model_delta', text: `token ${seq} of the answer, with some words ` };
    return { stream: STREAM, seq, machine: 'react-agent', kind: event.type, event, from: 'thinking', to: 'thinking', at: 1_700_000_000_000 + seq * 13 };
  });
}

/**
 * Archival throughput: runes per second from a SQLite store to gzipped NDJSON segments on disk
 * (writeArchive over storeRunePages into fsColdStore: segments, SHA-256 each, a durable atomic
 * put each, the manifest last), against the anchor: the same pages read from the same store,
 * serialized to NDJSON and written with zlib alone, as one gzip file.
 */
export async function benchArchival(): Promise<boolean> {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-bench-archival-'));
  let store: RuneStore | undefined;
  try {
    store = sqliteStore(join(dir, 'log.db'));
    const runes = agentRunes();
    for (let i = 0; i < RUNES; i += PAGE) await store.append(runes.slice(i, i + PAGE));
    const source = store;
    const cold = fsColdStore(join(dir, 'cold'));
    let round = 0;

    const archive = async () => {
      const manifest = await writeArchive(cold, {
        stream: STREAM,
        machine: 'react-agent',
        state: null,
        at: ++round,
        runes: storeRunePages(source, STREAM, { pageSize: PAGE }),
      });
      if (manifest.seq !== RUNES) throw new Error(`archived ${manifest.seq} runes, expected ${RUNES}`);
    };
    const zlibAlone = async () => {
      const lines: string[] = [];
      for await (const page of storeRunePages(source, STREAM, { pageSize: PAGE })) for (const rune of page) lines.push(JSON.stringify(rune));
      await writeFile(join(dir, 'zlib-alone.ndjson.gz'), await gzipAsync(Buffer.from(`${lines.join('\n')}\n`, 'utf8')));
    };

    const [candidate, anchor] = await compareAsync(
      3,
      () => measureAsync('writeArchive -> fsColdStore (segments, sha256)', RUNES, archive),
      () => measureAsync('store.read -> NDJSON -> zlib gzip -> one file', RUNES, zlibAlone),
    );
    return report(`archival: ${RUNES.toLocaleString('en-US')} runes from SQLite to gzipped segments on disk, runes/s`, candidate, anchor, BAR);
  } finally {
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
