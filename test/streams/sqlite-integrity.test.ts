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

/** Changes the first occurrence of `from` in the closed file's bytes to `to` (same length): what a damaged page does to a rune. */
function alterInFile(path: string, from: string, to: string): void {
  const bytes = readFileSync(path);
  const at = bytes.indexOf(from, 0, 'utf8');
  expect(at).toBeGreaterThan(0);
  bytes.write(to, at, 'utf8');
  writeFileSync(path, bytes);
}

/** A closed file with streams s0..s4 of 30 runes each; rune n of stream s<k> says `mark-s<k>-<n>`. */
async function markedFile(options: Parameters<typeof sqliteStore>[1] = {}): Promise<string> {
  const path = join(dir, `chain-${++files}.db`);
  const store = sqliteStore(path, options);
  for (let s = 0; s < 5; s++) {
    await store.append(
      Array.from({ length: 30 }, (_, i) => ({
        stream: `s${s}`,
        seq: i + 1,
        machine: 'chat-actor',
        kind: 'Pause',
        event: { type: 'Pause', reason: `mark-s${s}-${String(i + 1).padStart(4, '0')}` },
        at: i,
      })),
    );
  }
  await store.close();
  return path;
}

describe('sqliteStore: the hash chain (D11)', () => {
  it('refuses the stream one of whose runes changed on disk (a character of its body) with chain_broken naming stream and seq, on read and on hydration; other streams are served as before', async () => {
    const path = await markedFile();
    alterInFile(path, 'mark-s2-0017', 'mark-s2-0018');
    const store = sqliteStore(path); // the pages are sound: quick_check passes, only the chain sees it
    const broken = { name: 'StoreError', code: 'chain_broken', message: expect.stringContaining('stream "s2": rune 17 does not match its hash chain') };
    await expect(store.read('s2')).rejects.toMatchObject(broken);
    await expect(store.readEvents('s2')).rejects.toMatchObject(broken);
    await expect(store.read('s2', 16, 5)).rejects.toMatchObject(broken);
    await expect(store.read('s2', 10, 7)).rejects.toMatchObject(broken); // the page that ends with it
    expect((await store.read('s2', 0, 16)).map((rune) => rune.seq)).toEqual(Array.from({ length: 16 }, (_, i) => i + 1)); // before it
    for (const stream of ['s0', 's1', 's3', 's4']) expect(await store.read(stream)).toHaveLength(30);
    await store.close();
  });

  it("refuses the stream one of whose runes' origin changed on disk (another identity, same length) with chain_broken", async () => {
    const path = join(dir, `chain-${++files}.db`);
    const store = sqliteStore(path);
    const rune = (seq: number, identity: string) => ({
      stream: 'o',
      seq,
      machine: 'chat-actor',
      kind: 'Pause',
      event: { type: 'Pause', reason: 'lunch' },
      at: seq,
      origin: { by: 'client' as const, identity },
    });
    await store.append([rune(1, 'ada-0001'), rune(2, 'bob-0002'), rune(3, 'cat-0003')]);
    expect((await store.read('o')).map((r) => r.origin)).toEqual([1, 2, 3].map((seq) => rune(seq, ['ada-0001', 'bob-0002', 'cat-0003'][seq - 1]!).origin));
    await store.close();
    alterInFile(path, 'bob-0002', 'eve-0002');
    const reopened = sqliteStore(path);
    await expect(reopened.read('o')).rejects.toMatchObject({ code: 'chain_broken', message: expect.stringContaining('stream "o": rune 2 does not match its hash chain') });
    await reopened.close();
  });

  it('a schema version 3 file (runes without hashes) is upgraded: its old runes read as they are, each stream chains from its first rune written after, and a change to one of those is caught', async () => {
    const path = await markedFile({ hashChain: false });
    const raw = new (await import('better-sqlite3')).default(path);
    raw.exec(
      'ALTER TABLE runes DROP COLUMN origin; ALTER TABLE snapshots DROP COLUMN v; ALTER TABLE runes DROP COLUMN hash; ALTER TABLE streams DROP COLUMN hash; PRAGMA user_version = 3',
    );
    raw.close();
    const upgraded = sqliteStore(path);
    await upgraded.append([{ stream: 's1', seq: 31, machine: 'chat-actor', kind: 'Pause', event: { type: 'Pause', reason: 'mark-s1-0031' }, at: 31 }]);
    await upgraded.append([{ stream: 's1', seq: 32, machine: 'chat-actor', kind: 'Pause', event: { type: 'Pause', reason: 'mark-s1-0032' }, at: 32 }]);
    expect(await upgraded.read('s1')).toHaveLength(32);
    await upgraded.close();

    alterInFile(path, 'mark-s1-0032', 'mark-s1-0033');
    const again = sqliteStore(path);
    await expect(again.read('s1')).rejects.toMatchObject({ code: 'chain_broken', message: expect.stringContaining('rune 32 ') });
    await again.close();
  });
});
