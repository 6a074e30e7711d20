import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Rune } from '../../src/index.js';
import { createEngine } from '../../src/streams/engine.js';
import { SQLITE_APPLICATION_ID, SQLITE_SCHEMA_VERSION, sqliteStore, type SqliteStoreOptions } from '../../src/streams/sqlite-store.js';
import { StoreConflictError, StoreError, type RuneStore } from '../../src/streams/store.js';
import { runeOf, runesOf, storeContract } from '../../src/store-kit.js';

let dir: string;
let files = 0;
const stores: RuneStore[] = [];
const connections: Database.Database[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'runestream-sqlite-'));
});
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  for (const db of connections.splice(0)) db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A path in this test's own temp dir where nothing exists yet. */
const freshPath = (): string => join(dir, `store-${++files}.db`);
/** A store closed after the test. */
const openStore = (path = freshPath(), options?: SqliteStoreOptions): RuneStore => {
  const store = sqliteStore(path, options);
  stores.push(store);
  return store;
};
/**
 * A raw connection to the file, as another program writing SQL would have. A store holds its file
 * locked from open to close, so this one is opened while no store has the file.
 */
const rawConnection = (path: string, options?: Database.Options): Database.Database => {
  const db = new Database(path, options);
  connections.push(db);
  return db;
};

storeContract('sqliteStore', () => openStore(), { describe, it, expect }, { restore: true });

describe('sqliteStore: the file', () => {
  it('is created with its schema, marked as a runestream file, in WAL mode', async () => {
    const path = freshPath();
    const store = openStore(path);
    await store.append(runesOf('a', 1, 2));
    await store.close();
    const raw = rawConnection(path, { readonly: true });
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(raw.pragma('application_id', { simple: true })).toBe(SQLITE_APPLICATION_ID);
    expect(raw.pragma('user_version', { simple: true })).toBe(SQLITE_SCHEMA_VERSION);
    expect(raw.prepare(`SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`).pluck().all()).toEqual(['runes', 'snapshots', 'streams']);
    expect(readdirSync(dir).filter((name) => name.endsWith('.creating'))).toEqual([]); // built aside, then linked in
  });

  it('keeps everything across close and reopen, and append continues each stream', async () => {
    const path = freshPath();
    const first = openStore(path);
    await first.append([...runesOf('a', 1, 3), ...runesOf('b', 1, 2)]);
    await first.saveSnapshot({ stream: 'a', seq: 2, state: { n: 2 } });
    expect(await first.prune('a', 1)).toBe(1);
    await first.close();

    const again = openStore(path);
    expect(await again.read('a')).toEqual(runesOf('a', 2, 2));
    expect(await again.read('b')).toEqual(runesOf('b', 1, 2));
    expect(await again.head('a')).toEqual({ stream: 'a', machine: 'counter', seq: 3, value: 'idle', at: 30 });
    expect(await again.latestSnapshot('a')).toEqual({ stream: 'a', seq: 2, state: { n: 2 } });
    await again.append([runeOf('a', 4), runeOf('b', 3)]);
    await expect(again.append([runeOf('a', 4)])).rejects.toThrow('stream "a": expected seq 5, got 4; nothing of the batch was written');
    await expect(again.append([runeOf('b', 1)])).rejects.toBeInstanceOf(StoreConflictError);
    expect((await again.read('a')).map((r) => r.seq)).toEqual([2, 3, 4]);
  });

  it('commits a batch of 1,000 runes over 100 streams at once, and nothing of a batch with one bad rune', async () => {
    const path = freshPath();
    const store = openStore(path);
    const streams = Array.from({ length: 100 }, (_, i) => `stream-${i}`);
    /** Seqs `from..from+9` of every stream, interleaved as dispatches arrive. */
    const batchOf = (from: number): Rune[] => Array.from({ length: 1000 }, (_, i) => runeOf(streams[i % 100]!, from + Math.floor(i / 100)));

    await store.append(batchOf(1));
    for (const stream of streams) expect(await store.read(stream)).toEqual(runesOf(stream, 1, 10));

    const gap = batchOf(11);
    gap[557] = runeOf('stream-57', 17); // stream-57's seq 16 comes in as 17
    const error = await store.append(gap).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(StoreConflictError);
    expect(error).toMatchObject({ stream: 'stream-57', expectedSeq: 16, gotSeq: 17 });

    const duplicateLast = batchOf(11);
    duplicateLast[999] = runeOf('stream-99', 19); // the very last rune: 999 runes were fine
    await expect(store.append(duplicateLast)).rejects.toMatchObject({ code: 'seq_conflict' });

    for (const stream of streams) expect(await store.head(stream)).toEqual({ stream, machine: 'counter', seq: 10, value: 'idle', at: 100 });
    const stored = async (): Promise<number> => (await Promise.all(streams.map((stream) => store.read(stream)))).flat().length;
    expect(await stored()).toBe(1000);
    await store.append(batchOf(11));
    expect(await stored()).toBe(2000);
  });

  it("reads back unicode, nested objects and numbers exactly, and runes whose machine is not their stream's", async () => {
    const path = freshPath();
    const event = {
      type: 'tick',
      text: 'é✓ "quoted" \\ back\nslash \t tab 𝄞 👩‍👩‍👧 العربية עברית 中文 \u0000 nul \u2028 lone \ud800 surrogate',
      '키 with spaces & "quotes"': { nested: { deeper: [1, [2, [3, { four: 4 }]], null, true, false, '', {}, []] } },
      numbers: [
        0,
        -1,
        1.5,
        -2.25,
        0.1 + 0.2,
        1e-7,
        1e21,
        123456789.12345679,
        Number.MAX_SAFE_INTEGER,
        Number.MIN_SAFE_INTEGER,
        Number.MAX_VALUE,
        Number.MIN_VALUE,
        -Number.EPSILON,
      ],
    };
    const runes: Rune[] = [
      { stream: 'u', seq: 1, machine: 'counter', kind: 'spawned', event: { type: 'spawn', input: event }, at: 0.5 },
      { stream: 'u', seq: 2, machine: 'counter', kind: 'tick', event, from: 'idle', to: 'idle', at: 1e15 + 0.25 },
      { stream: 'u', seq: 3, machine: 'another-machine', kind: 'tick', event: { type: 'tick' }, to: 'done', at: -3 },
      { stream: 'u', seq: 4, machine: 'counter', kind: 'tick', event: { type: 'tick' }, from: 'done', at: 4 },
    ];
    const state = { value: 'idle', context: { event, seen: [1, 2, 3] } };
    const store = openStore(path);
    await store.append(runes);
    await store.saveSnapshot({ stream: 'u', seq: 4, state });
    await store.close();

    const again = openStore(path);
    const read = await again.read('u');
    expect(read).toStrictEqual(runes); // no `from: undefined` where there was no `from`
    expect(read.map((rune) => Object.keys(rune))).toEqual(runes.map((rune) => Object.keys(rune))); // same key order
    expect(await again.latestSnapshot('u')).toStrictEqual({ stream: 'u', seq: 4, state });
  });

  it("stores a rune compactly: stream, seq and kind as columns, the rest as JSON without its stream's machine", async () => {
    const path = freshPath();
    const store = openStore(path);
    await store.append([...runesOf('a', 1, 2), { ...runeOf('a', 3), machine: 'other', from: undefined }]);
    await store.close();
    const raw = rawConnection(path, { readonly: true });
    expect(raw.prepare(`SELECT stream, seq, kind, body FROM runes ORDER BY seq`).raw().all()).toEqual([
      ['a', 1, 'spawned', '{"event":{"type":"spawn","input":{"n":1}},"to":"idle","at":1}'],
      ['a', 2, 'tick', '{"event":{"type":"tick","n":2,"text":"é✓ \\"quoted\\" 2"},"from":"idle","to":"idle","at":20}'],
      ['a', 3, 'tick', '{"machine":"other","event":{"type":"tick","n":3,"text":"é✓ \\"quoted\\" 3"},"to":"idle","at":30}'],
    ]);
    expect(raw.prepare('SELECT stream, machine, seq, value, at FROM streams').all()).toEqual([{ stream: 'a', machine: 'counter', seq: 3, value: 'idle', at: 30 }]);
  });

  it('keeps a payload in its own column, NULL for a rune without one', async () => {
    const path = freshPath();
    const store = openStore(path);
    await store.append([runeOf('a', 1), { ...runeOf('a', 2), payload: { callId: 'c1', status: 'success', output: { n: [1, 'é'] } } }]);
    await store.close();
    const raw = rawConnection(path, { readonly: true });
    expect(raw.prepare(`SELECT seq, payload FROM runes ORDER BY seq`).raw().all()).toEqual([
      [1, null],
      [2, '{"callId":"c1","status":"success","output":{"n":[1,"é"]}}'],
    ]);
  });
});

describe('sqliteStore: a schema version 1 file (no payloads) is upgraded in place', () => {
  /**
   * Takes a closed file of this version back to what schema version 1 wrote: the runes table
   * without its `payload` column, at user_version 1 (the only difference between the two).
   */
  function backToVersionOne(path: string): void {
    const raw = new Database(path);
    raw.exec(
      'ALTER TABLE runes DROP COLUMN origin; ALTER TABLE snapshots DROP COLUMN v; ALTER TABLE runes DROP COLUMN hash; ALTER TABLE streams DROP COLUMN hash; ALTER TABLE runes DROP COLUMN payload; PRAGMA user_version = 1',
    );
    expect(raw.prepare(`SELECT name FROM pragma_table_info('runes')`).pluck().all()).toEqual(['stream', 'seq', 'kind', 'body']);
    raw.close();
  }

  /** A version 1 file with runes and a snapshot in it. */
  async function versionOneFile(): Promise<string> {
    const path = freshPath();
    const store = sqliteStore(path);
    await store.append([...runesOf('a', 1, 3), ...runesOf('b', 1, 1)]);
    await store.saveSnapshot({ stream: 'a', seq: 2, state: { n: 2 } });
    await store.close();
    backToVersionOne(path);
    return path;
  }

  it('opens it, adds the payload column, keeps every rune and snapshot, and stores payloads from then on', async () => {
    const path = await versionOneFile();
    const store = openStore(path);
    expect(await store.read('a')).toEqual(runesOf('a', 1, 3));
    expect(await store.latestSnapshot('a')).toEqual({ stream: 'a', seq: 2, state: { n: 2 } });
    const withPayload: Rune = { ...runeOf('a', 4), payload: { turnId: '1', input: 'hi' } };
    await store.append([withPayload]);
    await store.close();

    const again = openStore(path);
    expect(await again.read('a', 3)).toEqual([withPayload]);
    expect(await again.head('b')).toMatchObject({ seq: 1 });
    await again.close();
    const raw = rawConnection(path, { readonly: true });
    expect(raw.pragma('user_version', { simple: true })).toBe(SQLITE_SCHEMA_VERSION);
    expect(raw.prepare(`SELECT name FROM pragma_table_info('runes')`).pluck().all()).toEqual(['stream', 'seq', 'kind', 'body', 'payload', 'hash', 'origin']);
    // The database still defends itself after the upgrade.
    expect(() => rawConnection(path).prepare(`UPDATE runes SET payload = '{}' WHERE stream = 'a' AND seq = 1`).run()).toThrow('runestream: runes are immutable');
  });

  it('an engine on an upgraded file hydrates the old runes and appends new ones with their payloads', async () => {
    const path = freshPath();
    const before = createEngine({ store: sqliteStore(path) });
    await before.spawn('call', 'tool-call', { callId: 'c1', toolName: 'ls', arguments: {} });
    await before.close();
    backToVersionOne(path);

    const engine = createEngine({ store: sqliteStore(path) });
    expect(await engine.dispatch('call', { type: 'no_approval_needed' })).toMatchObject({ accepted: true });
    expect(await engine.dispatch('call', { type: 'success', output: 'a.txt' })).toMatchObject({
      accepted: true,
      rune: { kind: 'tool.result', payload: { callId: 'c1', status: 'success', output: 'a.txt' } },
    });
    await engine.close();
    const store = openStore(path);
    expect((await store.read('call')).map((rune) => rune.payload)).toEqual([undefined, undefined, { callId: 'c1', status: 'success', output: 'a.txt' }]);
  });

  it('refuses a file that says version 2 but has no payload column', async () => {
    const path = await versionOneFile();
    const raw = new Database(path);
    raw.pragma('user_version = 2');
    raw.close();
    let error: unknown;
    try {
      stores.push(sqliteStore(path));
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({
      code: 'invalid_file',
      message: `cannot open "${path}": its schema version is 2, but its runes table has no "payload" column; the file was left untouched`,
    });
  });
});

describe('sqliteStore: a schema version 2 file (no restore) is upgraded in place', () => {
  it('opens it, replaces its gapless trigger, and restores pruned runes from then on; the trigger still refuses a gap', async () => {
    const path = freshPath();
    const store = sqliteStore(path);
    await store.append(runesOf('a', 1, 6));
    await store.saveSnapshot({ stream: 'a', seq: 4, state: { n: 4 } });
    await store.prune('a', 4);
    await store.close();
    const raw = new Database(path);
    // Version 2's trigger: a rune only ever continues its stream.
    raw.exec(`ALTER TABLE runes DROP COLUMN origin; ALTER TABLE snapshots DROP COLUMN v; ALTER TABLE runes DROP COLUMN hash; ALTER TABLE streams DROP COLUMN hash; DROP TRIGGER runes_gapless;
      CREATE TRIGGER runes_gapless BEFORE INSERT ON runes BEGIN
        SELECT RAISE(ABORT, 'runestream: a rune must continue its stream without gap (seq = last seq + 1)')
        WHERE NEW.seq IS NOT 1 + coalesce((SELECT max(seq) FROM runes WHERE stream = NEW.stream), (SELECT seq FROM streams WHERE stream = NEW.stream));
      END; PRAGMA user_version = 2`);
    expect(() => raw.prepare(`INSERT INTO runes (stream, seq, kind, body) VALUES ('a', 4, 'tick', '{}')`).run()).toThrow('without gap');
    raw.close();

    const upgraded = openStore(path);
    expect(await upgraded.restore!(runesOf('a', 1, 4))).toBe(4);
    expect(await upgraded.read('a')).toEqual(runesOf('a', 1, 6));
    await upgraded.close();
    const after = rawConnection(path);
    expect(after.pragma('user_version', { simple: true })).toBe(SQLITE_SCHEMA_VERSION);
    expect(() => after.prepare(`INSERT INTO runes (stream, seq, kind, body) VALUES ('a', 9, 'tick', '{}')`).run()).toThrow('without gap');
  });
});

describe('sqliteStore: nothing stored can brick a stream', () => {
  /**
   * Three times SQLite's JSON depth limit (1,000, past which its JSON functions say "malformed
   * JSON"), and under V8's: JSON.stringify overflows the stack at about 4,100 levels.
   */
  const DEPTH = 3_000;
  const nested = (depth: number): unknown => {
    let value: unknown = { leaf: 'here' };
    for (let i = 0; i < depth; i++) value = { a: value };
    return value;
  };
  const depthOf = (value: unknown): number => {
    let depth = 0;
    for (let v = value as { a?: unknown }; v.a !== undefined; v = v.a as { a?: unknown }) depth++;
    return depth;
  };
  const argumentsOf = (spawnEvent: unknown): unknown => (spawnEvent as { input: { arguments: unknown } }).input.arguments;

  it('reads, reads the events of, and hydrates a stream whose spawn input nests 3,000 levels, after a reopen', async () => {
    const path = freshPath();
    const first = openStore(path);
    const input = { callId: 'call-deep', toolName: 'shell', arguments: nested(DEPTH) };
    const spawn: Rune = { stream: 'deep', seq: 1, machine: 'tool-call', kind: 'tool.call', event: { type: 'spawn', input }, to: 'pending_call', at: 1 };
    await first.append([spawn]);
    await first.close();

    const again = openStore(path);
    const [event] = await again.readEvents('deep');
    expect(depthOf(argumentsOf(event))).toBe(DEPTH);
    // Compared level by level here: a deep equality check of this would overflow the stack itself.
    const [rune] = await again.read('deep');
    expect({ ...rune, event: undefined }).toEqual({ ...spawn, event: undefined });
    expect(depthOf(argumentsOf(rune!.event))).toBe(DEPTH);

    const engine = createEngine({ store: again });
    const hydrated = await engine.snapshot<{ value: string; arguments: unknown }>('deep');
    expect([hydrated?.seq, hydrated?.state.value]).toEqual([1, 'pending_call']);
    expect(depthOf(hydrated!.state.arguments)).toBe(DEPTH);
    expect(await engine.dispatch('deep', { type: 'no_approval_needed' })).toMatchObject({ accepted: true, rune: { seq: 2, to: 'executing' } });
    engine.release('deep');
    expect(await engine.dispatch('deep', { type: 'success', output: 'done' })).toMatchObject({ accepted: true, rune: { seq: 3 } });
    await engine.close(); // closes the store
  });
});

describe('sqliteStore: the database keeps each stream gapless on its own', () => {
  /**
   * A file holding runes a1..a3, written by a store and closed, and a raw connection to it:
   * another program writing SQL to the file while no store holds it.
   */
  async function fileAndRaw(count = 3): Promise<{ path: string; raw: Database.Database }> {
    const path = freshPath();
    const store = sqliteStore(path);
    await store.append(runesOf('a', 1, count));
    await store.close();
    return { path, raw: rawConnection(path) };
  }
  /** Closes the raw connection and opens a store on the file: what runestream finds there next. */
  const storeAfter = (path: string, raw: Database.Database): RuneStore => {
    raw.close();
    return openStore(path);
  };
  const body = (seq: number): string => JSON.stringify({ event: { type: 'tick', n: seq }, at: seq });
  const seqsOf = (raw: Database.Database): number[] => raw.prepare<[], number>(`SELECT seq FROM runes WHERE stream = 'a' ORDER BY seq`).pluck().all();

  it('refuses, from another connection, a rune that does not continue its stream', async () => {
    const { path, raw } = await fileAndRaw();
    const insert = raw.prepare('INSERT INTO runes (stream, seq, kind, body) VALUES (?, ?, ?, ?)');
    const gapless = 'runestream: a rune must continue its stream without gap (seq = last seq + 1)';
    expect(() => insert.run('a', 5, 'tick', body(5))).toThrow(gapless); // a gap
    expect(() => insert.run('a', 3, 'tick', body(3))).toThrow(gapless); // a duplicate
    expect(() => insert.run('a', 1, 'tick', body(1))).toThrow(gapless);
    expect(() => insert.run('a', 0, 'tick', body(0))).toThrow(gapless);
    expect(() => insert.run('nobody', 1, 'spawned', body(1))).toThrow(gapless); // a stream never created
    expect(() => raw.prepare('INSERT OR REPLACE INTO runes (stream, seq, kind, body) VALUES (?, ?, ?, ?)').run('a', 2, 'tick', body(2))).toThrow(gapless);
    // A statement of several runes is refused whole: a4 does not stay behind a6.
    expect(() => raw.prepare('INSERT INTO runes (stream, seq, kind, body) VALUES (?, 4, ?, ?), (?, 6, ?, ?)').run('a', 'tick', body(4), 'a', 'tick', body(6))).toThrow(
      gapless,
    );
    expect(seqsOf(raw)).toEqual([1, 2, 3]);

    // What the store itself does, done by hand in one transaction, is accepted and read back.
    raw.transaction(() => {
      insert.run('a', 4, 'tick', body(4));
      raw.prepare('UPDATE streams SET seq = 4 WHERE stream = ? AND seq = 3').run('a');
    })();
    const store = storeAfter(path, raw);
    await store.append([runeOf('a', 5)]);
    expect(await store.read('a')).toEqual([
      ...runesOf('a', 1, 3),
      { stream: 'a', seq: 4, machine: 'counter', kind: 'tick', event: { type: 'tick', n: 4 }, at: 4 },
      runeOf('a', 5),
    ]);
  });

  it('refuses a head moved anywhere but to its last rune, a stream created twice or deleted, and runes rewritten', async () => {
    const { path, raw } = await fileAndRaw();
    const head = "runestream: a stream's head only moves forward, to its last rune";
    expect(() => raw.exec(`UPDATE streams SET seq = 4 WHERE stream = 'a'`)).toThrow(head); // no rune 4: the next rune would leave a gap
    expect(() => raw.exec(`UPDATE streams SET seq = 2 WHERE stream = 'a'`)).toThrow(head); // back: rune 3 would come twice
    expect(() => raw.exec(`UPDATE streams SET machine = 'other' WHERE stream = 'a'`)).toThrow('runestream: a stream keeps its id and machine');
    expect(() => raw.exec(`UPDATE streams SET stream = 'b' WHERE stream = 'a'`)).toThrow('runestream: a stream keeps its id and machine');
    const created = 'runestream: a stream is created once, at seq 0 (its spawn rune is seq 1)';
    expect(() => raw.exec(`INSERT INTO streams (stream, machine, seq) VALUES ('b', 'counter', 5)`)).toThrow(created);
    expect(() => raw.exec(`INSERT OR REPLACE INTO streams (stream, machine, seq) VALUES ('a', 'counter', 0)`)).toThrow(created);
    expect(() => raw.exec(`DELETE FROM streams`)).toThrow('runestream: streams are never deleted');
    expect(() => raw.exec(`UPDATE runes SET seq = 9 WHERE stream = 'a' AND seq = 3`)).toThrow('runestream: runes are immutable');
    expect(() => raw.exec(`UPDATE runes SET body = '{}' WHERE stream = 'a'`)).toThrow('runestream: runes are immutable');
    const store = storeAfter(path, raw);
    expect(await store.head('a')).toMatchObject({ stream: 'a', machine: 'counter', seq: 3 });
    expect(await store.read('a')).toEqual(runesOf('a', 1, 3));
  });

  it('deletes only the oldest runes a snapshot covers, and keeps snapshots from moving back', async () => {
    const { path, raw } = await fileAndRaw(6);
    const prune = "runestream: only a stream's oldest runes, covered by its snapshot, may be deleted";
    expect(() => raw.exec(`DELETE FROM runes WHERE stream = 'a' AND seq = 1`)).toThrow(prune); // no snapshot yet
    raw.exec(`INSERT INTO snapshots (stream, seq, state) VALUES ('a', 4, '{"n":4}')`);
    expect(() => raw.exec(`DELETE FROM runes WHERE stream = 'a' AND seq = 2`)).toThrow(prune); // a hole after rune 1
    expect(() => raw.exec(`DELETE FROM runes WHERE stream = 'a' AND seq <= 5`)).toThrow(prune); // rune 5 is not covered
    expect(() => raw.exec(`DELETE FROM runes WHERE stream = 'a' AND seq = 6`)).toThrow(prune); // the last rune
    expect(raw.prepare(`DELETE FROM runes WHERE stream = 'a' AND seq <= 3`).run().changes).toBe(3); // the oldest, covered

    const snapshot = 'runestream: a snapshot must cover existing runes of its stream, and be newer than the one it replaces';
    expect(() => raw.exec(`UPDATE snapshots SET seq = 1`)).toThrow(snapshot);
    expect(() => raw.exec(`INSERT OR REPLACE INTO snapshots (stream, seq, state) VALUES ('a', 1, '{}')`)).toThrow(snapshot);
    expect(() => raw.exec(`INSERT INTO snapshots (stream, seq, state) VALUES ('b', 1, '{}')`)).toThrow(snapshot);
    expect(() => raw.exec(`UPDATE snapshots SET seq = 7`)).toThrow(snapshot); // past the head
    expect(() => raw.exec(`DELETE FROM snapshots`)).toThrow('runestream: snapshots are replaced, never deleted');

    const store = storeAfter(path, raw);
    expect((await store.read('a')).map((r) => r.seq)).toEqual([4, 5, 6]);
    expect(await store.latestSnapshot('a')).toEqual({ stream: 'a', seq: 4, state: { n: 4 } });
    expect(await store.prune('a', 4)).toBe(1);
  });

  it('refuses appends, rather than leave a gap, after a writer stored runes without advancing the head', async () => {
    const { path, raw } = await fileAndRaw();
    raw.prepare('INSERT INTO runes (stream, seq, kind, body) VALUES (?, ?, ?, ?)').run('a', 4, 'tick', body(4)); // no head update
    const store = storeAfter(path, raw);
    expect(await store.head('a')).toMatchObject({ stream: 'a', machine: 'counter', seq: 3 });
    const error = await store.append([runeOf('a', 4)]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(StoreError);
    expect(error).toMatchObject({ code: 'seq_conflict' });
    expect((error as Error).message).toBe(
      'the database refused the batch (runestream: a rune must continue its stream without gap (seq = last seq + 1)); nothing of the batch was written',
    );
    await store.close();
    const repair = rawConnection(path);
    repair.exec(`UPDATE streams SET seq = 4 WHERE stream = 'a'`); // repaired: the head moves to its last rune
    const repaired = storeAfter(path, repair);
    await repaired.append([runeOf('a', 5)]);
    expect((await repaired.read('a')).map((r) => r.seq)).toEqual([1, 2, 3, 4, 5]);
  });
});

describe('sqliteStore: one writer process per file', () => {
  const tsx = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));
  const opener = fileURLToPath(new URL('../fixtures/open-store.ts', import.meta.url));
  /** What test/fixtures/open-store.ts prints. */
  type Opened = { opened: true; runes: number } | { opened: false; code: string; message: string };
  const lockedMessage = (path: string): string =>
    `sqliteStore "${path}": another process has the file open for writing (a runestream server, or another program holding its lock); stop that process first, or use the PostgreSQL store for several processes on one log (SQLITE_BUSY: database is locked)`;

  /**
   * Runs the fixture in another process on `path`; resolves to its line and the process. One that
   * holds the file runs in node itself (`--import tsx`), so that SIGKILL reaches the process with
   * the lock: the tsx command runs the script in a child process of its own.
   */
  async function openElsewhere(path: string, hold = false): Promise<{ line: Opened; child: ChildProcess }> {
    const [command, args] = hold ? [process.execPath, ['--import', 'tsx', opener, path, '50', 'hold']] : [tsx, [opener, path, '50']];
    const child = spawn(command, args, { cwd: fileURLToPath(new URL('../../', import.meta.url)), stdio: ['ignore', 'pipe', 'pipe'] });
    return { line: JSON.parse(await firstLine(child)) as Opened, child };
  }
  const exitOf = (child: ChildProcess): Promise<number | NodeJS.Signals | null> =>
    child.exitCode !== null || child.signalCode !== null
      ? Promise.resolve(child.exitCode ?? child.signalCode)
      : new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));

  it("refuses another process's store with 'locked' while this one holds the file, which keeps working; opens once it is closed", async () => {
    const path = freshPath();
    const store = openStore(path);
    await store.append(runesOf('a', 1, 2));

    const refused = await openElsewhere(path);
    expect(refused.line).toEqual({ opened: false, code: 'locked', message: lockedMessage(path) });
    expect(await exitOf(refused.child)).toBe(0);

    await store.append([runeOf('a', 3)]); // the holder carries on
    expect(await store.read('a')).toEqual(runesOf('a', 1, 3));
    await store.close();

    const opened = await openElsewhere(path);
    expect(opened.line).toEqual({ opened: true, runes: 3 });
    expect(await exitOf(opened.child)).toBe(0);
  });

  it('is free again once the holding process is killed with SIGKILL: no stale lock', async () => {
    const path = freshPath();
    const first = sqliteStore(path);
    await first.append(runesOf('a', 1, 2));
    await first.close();
    const holder = await openElsewhere(path, true);
    try {
      expect(holder.line).toEqual({ opened: true, runes: 2 });
      expect(() => sqliteStore(path, { busyTimeoutMs: 0 })).toThrow(expect.objectContaining({ code: 'locked' }));
    } finally {
      holder.child.kill('SIGKILL');
    }
    expect(await exitOf(holder.child)).toBe('SIGKILL');
    const store = openStore(path, { busyTimeoutMs: 0 });
    expect(await store.read('a')).toEqual(runesOf('a', 1, 2));
  });

  it('refuses a second store in this process too, and any other SQLite connection to the file while the store holds it', async () => {
    const path = freshPath();
    const store = openStore(path);
    await store.append(runesOf('a', 1, 2));
    let error: unknown;
    try {
      stores.push(sqliteStore(path, { busyTimeoutMs: 0 }));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(StoreError);
    expect(error).toMatchObject({ code: 'locked', message: lockedMessage(path), cause: { code: 'SQLITE_BUSY' } });
    // Another program's connection can neither write nor read: no runes behind the store's back.
    const raw = rawConnection(path, { timeout: 0 });
    expect(() => raw.prepare(`INSERT INTO streams (stream, machine, seq) VALUES ('b', 'counter', 0)`).run()).toThrow('database is locked');
    expect(() => raw.prepare('SELECT count(*) FROM runes').get()).toThrow('database is locked');
    await store.append([runeOf('a', 3)]);
    expect(await store.read('a')).toEqual(runesOf('a', 1, 3));
  });
});

describe('sqliteStore: refuses a file that is not its own, and leaves it untouched', () => {
  const sha256 = (path: string): string => createHash('sha256').update(readFileSync(path)).digest('hex');

  /**
   * Opens `path`, expecting 'invalid_file' for `problem`; the file and the dir listing must not
   * change. `sameListing: false` is for files whose header says runestream (our application_id,
   * a known version, WAL mode): those are checked further by a read-only SQLite connection, which
   * leaves an empty -wal / -shm behind; the file itself is still byte for byte the same.
   */
  function expectRefused(path: string, problem: string, { sameListing = true } = {}): void {
    const before = { hash: sha256(path), listing: readdirSync(dir).sort() };
    let error: unknown;
    try {
      stores.push(sqliteStore(path));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(StoreError);
    expect(error).toMatchObject({ code: 'invalid_file' });
    expect((error as Error).message).toBe(`cannot open "${path}": ${problem}; the file was left untouched`);
    expect(sha256(path)).toBe(before.hash);
    if (sameListing) expect(readdirSync(dir).sort()).toEqual(before.listing); // no -wal, -shm or -journal appeared
  }

  /** A runestream file holding `count` runes of stream 'a', closed (so fully checkpointed). */
  async function runestreamFile(count = 3): Promise<string> {
    const path = freshPath();
    const store = sqliteStore(path);
    await store.append(runesOf('a', 1, count));
    await store.close();
    return path;
  }

  it('random bytes', () => {
    const path = freshPath();
    const bytes = Buffer.alloc(8192);
    for (let i = 0, x = 0x2545f491; i < bytes.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      bytes[i] = x & 0xff;
    }
    writeFileSync(path, bytes);
    expectRefused(path, 'it is not an SQLite database (its first bytes are not "SQLite format 3")');
  });

  it('a truncated header, an empty file, a file cut after its first page', async () => {
    const whole = readFileSync(await runestreamFile(2000));
    expect(whole.length).toBeGreaterThan(4096 * 4);
    const header = freshPath();
    writeFileSync(header, whole.subarray(0, 50));
    expectRefused(header, 'its SQLite header is truncated (50 of 100 bytes)');

    const empty = freshPath();
    writeFileSync(empty, '');
    expectRefused(empty, 'it is empty (0 bytes); remove it, or give a path that does not exist to create a store');

    const firstPage = freshPath();
    writeFileSync(firstPage, whole.subarray(0, 4096));
    expectRefused(firstPage, 'SQLite cannot read it (SQLITE_CORRUPT: database disk image is malformed)', { sameListing: false });
  });

  it('an SQLite database of another application: no application_id, another one', () => {
    const other = freshPath();
    const foreign = new Database(other);
    foreign.pragma('journal_mode = WAL');
    foreign.exec(`CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes (text) VALUES ('keep me')`);
    foreign.close();
    expectRefused(other, 'it is an SQLite database of another application (application_id 0, none set; a runestream file has 0x52554e45)');

    const fossil = freshPath();
    const app = new Database(fossil);
    app.pragma('application_id = 0x0f055112');
    app.exec(`CREATE TABLE streams (stream TEXT); CREATE TABLE runes (x); CREATE TABLE snapshots (y)`);
    app.close();
    expectRefused(fossil, 'it is an SQLite database of another application (application_id 0x0f055112; a runestream file has 0x52554e45)');
  });

  it('a newer schema version, or a runestream application_id without the schema', async () => {
    const newer = await runestreamFile();
    const raw = new Database(newer);
    raw.pragma('user_version = 7');
    raw.close();
    expectRefused(newer, 'it was written by a newer runestream (schema version 7; this one reads version 6)');

    const bare = freshPath();
    const ours = new Database(bare);
    ours.pragma(`application_id = ${SQLITE_APPLICATION_ID}`);
    ours.pragma('user_version = 1');
    ours.exec('CREATE TABLE notes (x)');
    ours.close();
    expectRefused(bare, 'its schema has no table "streams"');

    const tampered = await runestreamFile();
    const drop = new Database(tampered);
    drop.exec('DROP TRIGGER runes_gapless');
    drop.close();
    expectRefused(tampered, 'its schema has no trigger "runes_gapless"', { sameListing: false });
  });

  it('a directory', () => {
    const path = freshPath();
    mkdirSync(path);
    let error: unknown;
    try {
      sqliteStore(path);
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: 'invalid_file', message: `cannot open "${path}": it is not a file; the file was left untouched` });
  });
});

describe('sqliteStore: options', () => {
  it('checks them before touching the file, naming the option', () => {
    const path = freshPath();
    const openWith = (options: unknown) => () => sqliteStore(path, options as SqliteStoreOptions);
    expect(openWith({ synchronous: 'fast' })).toThrow(new TypeError(`sqliteStore: the "synchronous" option must be 'normal' or 'full', got "fast"`));
    expect(openWith({ synchronus: 'full' })).toThrow(
      new TypeError('sqliteStore: unknown option "synchronus"; the options are "synchronous", "busyTimeoutMs", "integrityCheck", "hashChain" and "thread"'),
    );
    expect(openWith({ busyTimeoutMs: -1 })).toThrow(new TypeError('sqliteStore: the "busyTimeoutMs" option must be a non-negative integer (milliseconds), got -1'));
    expect(openWith(null)).toThrow(new TypeError('sqliteStore: the options must be an object, got null'));
    expect(() => sqliteStore(':memory:')).toThrow(new TypeError('sqliteStore: ":memory:" is not a file; use memoryStore() for a store in memory'));
    expect(() => sqliteStore('')).toThrow(new TypeError('sqliteStore: the path must be a non-empty string (a file path), got ""'));
    expect(existsSync(path)).toBe(false);
  });

  it("waits up to busyTimeoutMs at open for another connection's lock, then refuses with 'locked'; opens once it lets go", async () => {
    const path = freshPath();
    const first = sqliteStore(path);
    await first.append(runesOf('a', 1, 2));
    await first.close();
    const other = rawConnection(path);
    other.exec('BEGIN IMMEDIATE'); // another program writing
    let error: unknown;
    try {
      stores.push(sqliteStore(path, { busyTimeoutMs: 20 }));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(StoreError);
    expect(error).toMatchObject({ code: 'locked', cause: { code: 'SQLITE_BUSY' } });
    expect((error as Error).message).toContain(`sqliteStore "${path}": another process has the file open for writing`);
    other.exec('ROLLBACK');
    other.close();
    const store = openStore(path, { busyTimeoutMs: 20 });
    await store.append([runeOf('a', 3)]);
    expect((await store.head('a'))?.seq).toBe(3);
  });

  it("runs with synchronous: 'full' as with the default", async () => {
    const path = freshPath();
    const store = openStore(path, { synchronous: 'full' });
    await store.append(runesOf('a', 1, 3));
    await store.close();
    expect(await openStore(path).read('a')).toEqual(runesOf('a', 1, 3));
  });

  it('names the missing directory when it cannot create the file', () => {
    const path = join(dir, 'missing', 'store.db');
    expect(() => sqliteStore(path)).toThrow(`sqliteStore: cannot create "${path}"`);
  });
});

describe('sqliteStore: close and crashes', () => {
  it('rejects every call once closed, and checkpoints the WAL into the file', async () => {
    const path = freshPath();
    const store = openStore(path);
    await store.append(runesOf('a', 1, 2));
    expect(existsSync(`${path}-wal`)).toBe(true);
    await store.close();
    await store.close(); // closing again is harmless
    expect(existsSync(`${path}-wal`)).toBe(false);
    const calls = [
      store.append(runesOf('a', 3, 1)),
      store.head('a'),
      store.read('a'),
      store.latestSnapshot('a'),
      store.saveSnapshot({ stream: 'a', seq: 1, state: {} }),
      store.prune('a', 1),
    ];
    for (const call of calls) await expect(call).rejects.toMatchObject({ code: 'closed' });
  });

  it('keeps a committed batch when its process is killed (kill -9) before closing', async () => {
    const path = freshPath();
    const script = join(dir, 'writer.mts');
    const storeModule = new URL('../../src/streams/sqlite-store.ts', import.meta.url).href;
    writeFileSync(
      script,
      [
        `import { sqliteStore } from ${JSON.stringify(storeModule)};`,
        `const store = sqliteStore(process.argv[2]);`,
        `await store.append(JSON.parse(process.argv[3]));`,
        `process.stdout.write('committed\\n');`,
        `setInterval(() => {}, 1 << 30); // never closes: killed`,
      ].join('\n'),
    );
    const runes = [...runesOf('a', 1, 3), ...runesOf('b', 1, 2)];
    const writer = spawn(process.execPath, ['--import', 'tsx', script, path, JSON.stringify(runes)], {
      cwd: fileURLToPath(new URL('../../', import.meta.url)),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => writer.once('exit', (_code, signal) => resolve(signal)));
    expect(await firstLine(writer)).toBe('committed');
    writer.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    expect(statSync(`${path}-wal`).size).toBeGreaterThan(0); // the batch is only in the WAL

    const store = openStore(path);
    expect(await store.read('a')).toEqual(runesOf('a', 1, 3));
    expect(await store.read('b')).toEqual(runesOf('b', 1, 2));
    await store.append([runeOf('a', 4)]);
  });
});

/** The child's first line on stdout; rejects with its stderr if it exits first. */
function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')));
    });
    child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.once('exit', (code) => reject(new Error(`the writer exited (${code}) before committing: ${err}`)));
  });
}
