import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { sqliteStore } from '../../src/streams/sqlite-store.js';

const dir = mkdtempSync(join(tmpdir(), 'runestream-sqlite-integrity-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** A SQLite file whose writer appended `count` runes (each acknowledged) and was killed: its WAL holds them. */
async function crashedWith(count: number): Promise<string> {
  const path = join(dir, `crashed-${++files}.db`);
  const child = promisify(execFile)(process.execPath, ['--import', 'tsx', 'test/fixtures/sqlite-acked-writer.ts', path, String(count)]);
  const { stdout } = await child.catch((error: { stdout: string; signal: string }) => {
    expect(error.signal).toBe('SIGKILL');
    return error;
  });
  expect(stdout).toBe(`acked ${count}\n`);
  return path;
}

/** A copy of the file and its WAL, for a second look. */
function copyOf(path: string): string {
  const copy = join(dir, `copy-${++files}.db`);
  copyFileSync(path, copy);
  copyFileSync(`${path}-wal`, `${copy}-wal`);
  return copy;
}

const WAL_HEADER = 32;
const FRAME = 24 + 4096;

describe('sqliteStore: a damaged WAL (D11)', () => {
  it('opens a crashed file whose WAL is intact with every acknowledged rune, and one whose WAL restarted after a checkpoint (older frames left behind)', async () => {
    for (const count of [101, 600]) {
      const store = sqliteStore(await crashedWith(count));
      expect((await store.read('s')).map((rune) => rune.seq)).toEqual(Array.from({ length: count }, (_, i) => i + 1));
      await store.close();
    }
  });

  it('refuses a file one of whose WAL frames has a flipped bit with corrupt_wal, naming the frame and the transactions SQLite would drop; both files stay untouched', async () => {
    const path = await crashedWith(101);
    const wal = readFileSync(`${path}-wal`);
    const frames = (wal.length - WAL_HEADER) / FRAME;
    expect(frames).toBeGreaterThan(101);
    const middle = Math.floor(frames / 2);
    wal[WAL_HEADER + middle * FRAME + 24 + 2000]! ^= 0x10; // one bit of a page, in the middle of the log
    writeFileSync(`${path}-wal`, wal);
    const before = { db: readFileSync(path), wal: readFileSync(`${path}-wal`) };

    expect(() => sqliteStore(path)).toThrow(expect.objectContaining({ name: 'StoreError', code: 'corrupt_wal', message: expect.stringContaining(`frame ${middle + 1} `) }));
    expect(() => sqliteStore(path)).toThrow(/SQLite would silently drop the \d+ transaction\(s\) committed after it/);
    expect(readFileSync(path).equals(before.db)).toBe(true);
    expect(readFileSync(`${path}-wal`).equals(before.wal)).toBe(true);

    // What it would have served instead: fewer runes than were acknowledged, without a word.
    const copy = copyOf(path);
    const Database = (await import('better-sqlite3')).default;
    const raw = new Database(copy, { readonly: true });
    expect(raw.prepare('SELECT count(*) FROM runes').pluck().get()).toBeLessThan(101);
    raw.close();
  });
});

describe('sqliteStore: damaged pages, checked at open', () => {
  it('refuses a file whose b-tree page was overwritten (its cell pointers garbled) with corrupt_file quoting quick_check; the file stays untouched; integrityCheck off opens it', async () => {
    const path = join(dir, `pages-${++files}.db`);
    const store = sqliteStore(path);
    for (let s = 0; s < 20; s++) {
      await store.append(
        Array.from({ length: 100 }, (_, i) => ({ stream: `s${s}`, seq: i + 1, machine: 'chat-actor', kind: 'Ping', event: { type: 'Ping', text: 'y'.repeat(100) }, at: i })),
      );
    }
    await store.close();
    const bytes = readFileSync(path);
    const page = Math.floor(bytes.length / 4096 / 2); // a page in the middle of the runes' b-tree, not a root
    for (let i = 8; i < 24; i++) bytes[page * 4096 + i]! ^= 0x5a;
    writeFileSync(path, bytes);

    expect(() => sqliteStore(path)).toThrow(
      expect.objectContaining({ name: 'StoreError', code: 'corrupt_file', message: expect.stringMatching(/quick_check found its pages corrupt \(.*page \d+/) }),
    );
    expect(readFileSync(path).equals(bytes)).toBe(true);
    const unchecked = sqliteStore(path, { integrityCheck: 'off' });
    expect(await unchecked.head('s0')).toMatchObject({ seq: 100 });
    await unchecked.close();
  });

  it('refuses an integrityCheck that is not quick or off, naming the option', () => {
    expect(() => sqliteStore(join(dir, 'never.db'), { integrityCheck: 'full' as 'quick' })).toThrow(/the "integrityCheck" option must be 'quick' or 'off'/);
  });
});
