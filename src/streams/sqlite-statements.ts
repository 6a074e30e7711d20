/** A SQLite store over an open, checked file: the `RuneStore` methods, every statement prepared once. */
import type Database from 'better-sqlite3';
import type { Rune } from '../reducers/rune.js';
import { CHAIN_START, chainHash } from './rune-chain.js';
import { ParsedOrigins } from './parsed-origins.js';
import { storeErrorOf } from './sqlite-errors.js';
import {
  StoreError,
  checkBatch,
  checkRestore,
  headFromRow,
  headMatches,
  prunePastSnapshot,
  openState,
  type RuneStore,
  type Snapshot,
  type StreamHead,
  type StreamHeadRow,
} from './store.js';

/** A rune's `body` column, parsed. */
type RuneBody = Omit<Rune, 'stream' | 'seq' | 'kind' | 'machine'> & { machine?: string };

/** Heads read per page of a listing (pages, not one open cursor: better-sqlite3 cannot write while a read iterates). */
const HEADS_PAGE = 1000;
/** The first page of a listing by prefix (see `heads`). */
const FIRST_PREFIX_PAGE = 16;

/** The store over an open, checked database: every statement prepared once. */
export function openStore(db: Database.Database, path: string, hashChain: boolean): RuneStore {
  const origins = new ParsedOrigins();
  const selectHead = db.prepare<[string], StreamHeadRow>('SELECT stream, machine, seq, value, at FROM streams WHERE stream = ?');
  const selectHeadHash = db.prepare<[string], { machine: string; seq: number; hash: number | null }>('SELECT machine, seq, hash FROM streams WHERE stream = ?');
  const selectHeads = db.prepare<[string, number], StreamHeadRow>('SELECT stream, machine, seq, value, at FROM streams WHERE stream > ? ORDER BY stream LIMIT ?');
  const selectHeadsOf = db.prepare<[string, string, number], StreamHeadRow>(
    'SELECT stream, machine, seq, value, at FROM streams WHERE machine = ? AND stream > ? ORDER BY stream LIMIT ?',
  );
  const insertStream = db.prepare<[string, string]>('INSERT INTO streams (stream, machine, seq) VALUES (?, ?, 0)');
  const insertRune = db.prepare<[string, number, string, string, string | null, number | null, string | null]>(
    'INSERT INTO runes (stream, seq, kind, body, payload, hash, origin) VALUES (?, ?, ?, ?, ?, ?, ?)',
  );
  const advanceHead = db.prepare<[number, string | null, number, number | null, string, number]>(
    'UPDATE streams SET seq = ?, value = ?, at = ?, hash = ? WHERE stream = ? AND seq = ?',
  );
  // From seq >= the one asked after: the rune before the first one returned is read too, so the
  // first one's link in the hash chain is checked as well. Raw rows (arrays), the cheapest to build.
  // The stored texts are parsed here: never SQLite's JSON functions, which refuse JSON nested
  // deeper than 1,000 levels ("malformed JSON") and so would leave such a stream unreadable for good.
  const selectRunes = db
    .prepare<[string, number, number], StoredRune>('SELECT seq, kind, body, payload, hash, origin FROM runes WHERE stream = ? AND seq >= ? ORDER BY seq LIMIT ?')
    .raw();
  // Without the chain, hydration reads the bodies alone: plucked strings, the cheapest read there is.
  const selectBodies = db.prepare<[string, number, number], string>('SELECT body FROM runes WHERE stream = ? AND seq > ? ORDER BY seq LIMIT ?').pluck();
  const selectSnapshot = db.prepare<[string], { seq: number; state: string; v: number | null }>('SELECT seq, state, v FROM snapshots WHERE stream = ?');
  const upsertSnapshot = db.prepare<[string, number, string, number | null]>(
    'INSERT INTO snapshots (stream, seq, state, v) VALUES (?, ?, ?, ?) ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq, state = excluded.state, v = excluded.v',
  );
  const deleteRunes = db.prepare<[string, number]>('DELETE FROM runes WHERE stream = ? AND seq <= ?');

  const appendBatch = db.transaction((runes: readonly Rune[]) => {
    // Each stream's row as it was before the batch (machine and head); undefined for a new stream.
    // Each stream's row as it was before the batch (machine and head); undefined for a new stream.
    // `hash`: its chain's last hash, carried through the batch's runes.
    const rows = new Map<string, { machine: string; seq: number; hash: number | null } | undefined>();
    const lastOf = new Map<string, Rune>();
    const heads = checkBatch(runes, (stream) => {
      const row = selectHeadHash.get(stream);
      rows.set(stream, row);
      return row?.seq ?? 0;
    });
    for (const rune of runes) {
      let row = rows.get(rune.stream);
      if (row === undefined) {
        // checkBatch let it through, so this is seq 1: the spawn creates its stream.
        insertStream.run(rune.stream, rune.machine);
        rows.set(rune.stream, (row = { machine: rune.machine, seq: 0, hash: CHAIN_START }));
      }
      const body = encodeBody(rune, row.machine);
      const payload = rune.payload === undefined ? null : JSON.stringify(rune.payload);
      // A stream without a hash yet (its runes written before the chain): it starts here.
      const origin = originText(rune.origin);
      if (hashChain) row.hash = chainHash(row.hash ?? CHAIN_START, rune.kind, body, payload, origin);
      insertRune.run(rune.stream, rune.seq, rune.kind, body, payload, hashChain ? row.hash : null, origin);
      lastOf.set(rune.stream, rune);
    }
    for (const [stream, seq] of heads) {
      const last = lastOf.get(stream)!;
      const row = rows.get(stream)!;
      if (advanceHead.run(seq, last.to ?? null, last.at, hashChain ? row.hash : null, stream, row.seq).changes !== 1) {
        throw new StoreError('seq_conflict', `stream "${stream}": its head moved during the batch; nothing of the batch was written`);
      }
    }
  });

  const saveSnapshot = db.transaction((snapshot: Snapshot, state: string) => {
    const head = selectHead.get(snapshot.stream);
    if (head === undefined) throw new StoreError('unknown_stream', `stream "${snapshot.stream}" has no runes to snapshot`);
    if (snapshot.seq > head.seq) throw new StoreError('unknown_stream', `stream "${snapshot.stream}" has no seq ${snapshot.seq} yet`);
    if ((selectSnapshot.get(snapshot.stream)?.seq ?? 0) <= snapshot.seq) upsertSnapshot.run(snapshot.stream, snapshot.seq, state, snapshot.v ?? null);
  });

  const prune = db.transaction((stream: string, throughSeq: number): number => {
    if (selectHead.get(stream) === undefined) return 0;
    const covered = selectSnapshot.get(stream)?.seq ?? 0;
    if (throughSeq > covered) throw prunePastSnapshot(stream, throughSeq, covered);
    return deleteRunes.run(stream, throughSeq).changes;
  });

  const selectOldest = db.prepare<[string], number | null>('SELECT min(seq) FROM runes WHERE stream = ?').pluck();
  const restore = db.transaction((runes: readonly Rune[]): number => {
    const first = runes[0]!;
    const row = selectHead.get(first.stream);
    checkRestore(runes, row === undefined ? undefined : headFromRow(row), selectOldest.get(first.stream) ?? (row?.seq ?? 0) + 1);
    // Newest first: each goes in right below the oldest stored rune, as the trigger wants.
    for (let i = runes.length - 1; i >= 0; i--) {
      const rune = runes[i]!;
      // Without a hash: its archive's checksum vouched for it; the chain resumes at the hot runes.
      insertRune.run(
        rune.stream,
        rune.seq,
        rune.kind,
        encodeBody(rune, row!.machine),
        rune.payload === undefined ? null : JSON.stringify(rune.payload),
        null,
        originText(rune.origin),
      );
    }
    return runes.length;
  });

  /**
   * A stream's stored rows with `seq > afterSeq`, at most `limit`, each checked against its hash
   * chain: a rune whose hash and its predecessor's (read too) do not chain is refused with
   * `chain_broken`. A rune whose predecessor has no hash (written before the chain, restored from
   * an archive) or is not stored (pruned) starts the chain again: its own hash is taken as it is.
   */
  const checkedRows = (stream: string, afterSeq: number, limit: number): StoredRune[] => {
    const count = limit === Infinity ? -1 : Math.max(0, Math.floor(limit));
    if (count === 0) return [];
    const rows = selectRunes.all(stream, afterSeq, count < 0 ? -1 : afterSeq === 0 ? count : count + 1);
    const first = rows[0]?.[0] === afterSeq ? 1 : 0; // the predecessor, read to check the first link
    if (hashChain) {
      let previous = first === 1 ? rows[0]![4] : afterSeq === 0 ? CHAIN_START : null;
      let expectedSeq = afterSeq + 1;
      for (let i = first; i < rows.length; i++) {
        const [seq, kind, body, payload, hash, origin] = rows[i]!;
        if (hash !== null && previous !== null && seq === expectedSeq && chainHash(previous, kind, body, payload, origin) !== hash) throw chainBroken(path, stream, seq);
        previous = hash;
        expectedSeq = seq + 1;
      }
    }
    if (first === 1) rows.shift();
    else if (count >= 0 && rows.length > count) rows.pop();
    return rows;
  };

  const { open, close } = openState();
  /** Runs `operation` on the open database; what SQLite throws becomes a {@link StoreError}. */
  const run = <T>(operation: () => T): T => {
    open();
    try {
      return operation();
    } catch (error) {
      throw storeErrorOf(path, error);
    }
  };

  return {
    async append(runes) {
      if (runes.length > 0) run(() => appendBatch.immediate(runes));
      else open();
    },
    async head(stream): Promise<StreamHead | undefined> {
      const row = run(() => selectHead.get(stream));
      return row === undefined ? undefined : headFromRow(row);
    },
    async *heads(query = {}) {
      const { prefix = '' } = query;
      // A prefix usually names a few streams (a conversation's): its first page is small and each
      // next one doubles, so listing them reads a handful of rows past the prefix, not a thousand.
      let page = prefix === '' ? HEADS_PAGE : FIRST_PREFIX_PAGE;
      // Stream ids in order: those with the prefix follow the prefix itself, all in one run.
      let after = prefix;
      if (prefix !== '') {
        const exact = run(() => selectHead.get(prefix));
        if (exact !== undefined && headMatches(headFromRow(exact), query)) yield headFromRow(exact);
      }
      for (;;) {
        const rows = run(() => (query.machine === undefined ? selectHeads.all(after, page) : selectHeadsOf.all(query.machine, after, page)));
        for (const row of rows) {
          if (!row.stream.startsWith(prefix)) return;
          const head = headFromRow(row);
          if (headMatches(head, query)) yield head;
        }
        if (rows.length < page) return;
        after = rows[rows.length - 1]!.stream;
        page = Math.min(HEADS_PAGE, page * 2);
      }
    },
    async read(stream, afterSeq = 0, limit = Infinity) {
      const { head, rows } = run(() => {
        const head = selectHead.get(stream);
        return { head, rows: head === undefined ? [] : checkedRows(stream, afterSeq, limit) };
      });
      return rows.map(([seq, kind, body, payload, , origin]): Rune => {
        const rune: Rune = { stream, seq, machine: head!.machine, kind, ...(JSON.parse(body) as RuneBody) };
        if (payload !== null) rune.payload = JSON.parse(payload) as Rune['payload'];
        if (origin !== null) rune.origin = origins.parsed(origin);
        return rune;
      });
    },
    async readEvents(stream, afterSeq = 0, limit = Infinity) {
      if (!hashChain) {
        const bodies = run(() => selectBodies.all(stream, afterSeq, limit === Infinity ? -1 : Math.max(0, Math.floor(limit))));
        return bodies.map((body) => (JSON.parse(body) as RuneBody).event);
      }
      const rows = run(() => checkedRows(stream, afterSeq, limit));
      return rows.map((row) => (JSON.parse(row[2]) as RuneBody).event);
    },
    async latestSnapshot(stream) {
      const row = run(() => selectSnapshot.get(stream));
      if (row === undefined) return undefined;
      const snapshot = { stream, seq: row.seq, state: JSON.parse(row.state) as unknown };
      return row.v === null ? snapshot : { ...snapshot, v: row.v };
    },
    async saveSnapshot(snapshot) {
      open();
      const state = JSON.stringify(snapshot.state) as string | undefined;
      if (state === undefined) throw new TypeError(`stream "${snapshot.stream}": a snapshot's state must be JSON; JSON.stringify gave undefined`);
      run(() => saveSnapshot.immediate(snapshot, state));
    },
    async prune(stream, throughSeq) {
      return run(() => prune.immediate(stream, throughSeq));
    },
    async restore(runes) {
      if (runes.length === 0) {
        open();
        return 0;
      }
      return run(() => restore.immediate(runes));
    },
    async close() {
      if (!close()) return;
      try {
        db.close();
      } catch (error) {
        throw storeErrorOf(path, error);
      }
    },
  };
}

/** A stored rune's row as `selectRunes` reads it: seq, kind, body, payload, hash, origin. */
type StoredRune = [seq: number, kind: string, body: string, payload: string | null, hash: number | null, origin: string | null];

/** The JSON of each origin object written: a log's runes share a few (one per epic, one per client), so each is written once. */
const originTexts = new WeakMap<object, string>();

/** A rune's `origin` column: its origin as JSON, NULL when it has none. */
function originText(origin: Rune['origin']): string | null {
  if (origin === undefined) return null;
  let text = originTexts.get(origin);
  if (text === undefined) {
    text = JSON.stringify(origin);
    // Only a frozen one: an object that can still change would be written as it was.
    if (Object.isFrozen(origin)) originTexts.set(origin, text);
  }
  return text;
}

/** The refusal of a stream one of whose runes does not match its hash chain. */
const chainBroken = (path: string, stream: string, seq: number): StoreError =>
  new StoreError(
    'chain_broken',
    `sqliteStore "${path}": stream "${stream}": rune ${seq} does not match its hash chain (its stored bytes changed after it was written: a damaged page or WAL frame); the stream is refused, other streams are served as before`,
  );

/**
 * The `body` of a rune: its JSON without the row's columns. Key order follows {@link Rune}, and
 * `read` spreads the body after `stream, seq, machine, kind`, so a rune reads back with its keys
 * in the order they were written.
 */
function encodeBody(rune: Rune, machine: string): string {
  return JSON.stringify(
    rune.machine === machine
      ? { event: rune.event, from: rune.from, to: rune.to, at: rune.at, v: rune.v }
      : { machine: rune.machine, event: rune.event, from: rune.from, to: rune.to, at: rune.at, v: rune.v },
  );
}
