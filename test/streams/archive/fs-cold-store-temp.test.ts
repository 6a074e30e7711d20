import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fsColdStore } from '../../../src/streams/archive/fs-cold-store.js';

const run = promisify(execFile);
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'runestream-cold-temp-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Every file under `folder`, hidden ones included, as paths relative to it. */
const filesUnder = (folder: string): string[] =>
  readdirSync(folder, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(folder.length + 1));

describe('fsColdStore: temporary files', () => {
  it('a put whose write fails midway (a file size limit: the disk is full after 64 KiB) rejects cold_store_failed and leaves no partial file', async () => {
    const cold = join(dir, 'cold');
    // A real process with a real limit: its write of 1 MB stops at 64 KiB with EFBIG.
    const { stdout } = await run('bash', [
      '-c',
      `ulimit -f 64; exec "${process.execPath}" --import tsx test/fixtures/cold-put-worker.ts "$0" streams/a/000000000001-000000000009.ndjson.gz 1000000`,
      cold,
    ]);
    expect(JSON.parse(stdout)).toEqual({ ok: false, code: 'cold_store_failed', cause: 'EFBIG' });
    expect(filesUnder(cold)).toEqual([]);
  });

  it('its first put sweeps the temporary files a crash left (older than staleTempMs), and leaves younger ones (puts in progress elsewhere)', async () => {
    const cold = join(dir, 'cold');
    mkdirSync(join(cold, '.tmp'), { recursive: true });
    writeFileSync(join(cold, '.tmp', 'stale.tmp'), 'half a segment');
    writeFileSync(join(cold, '.tmp', 'young.tmp'), 'a put in progress');
    const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000);
    utimesSync(join(cold, '.tmp', 'stale.tmp'), twoHoursAgo, twoHoursAgo);

    const store = fsColdStore(cold, { staleTempMs: 3_600_000 });
    await store.put('notes/a.txt', new TextEncoder().encode('hello'));
    expect(filesUnder(cold).sort()).toEqual(['.tmp/young.tmp', 'notes/a.txt']);
    expect(await store.list('')).toEqual(['notes/a.txt']);
  });

  it('refuses a staleTempMs that is not a non-negative integer, naming it', () => {
    expect(() => fsColdStore(dir, { staleTempMs: -1 })).toThrow(/"staleTempMs" is a non-negative integer/);
  });
});
