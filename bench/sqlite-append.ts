import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Rune } from '../src/index.js';
import { WAL_CHECKPOINT_PAGES, sqliteStore } from '../src/streams/sqlite-store.js';
import { BATCH, STREAMS, chatActorBatches } from './chat-actor-batches.js';
import { compareAsync, measureAsync, report } from './harness.js';

/**
 * Issue 3's bar: durable appends through `sqliteStore(path).append`, one batch of 100 runes over
 * 10 streams per call, against raw better-sqlite3 inserting the same rows (the store's own `runes`
 * table definition, the same JSON text, built the same way) with one prepared statement in one
 * transaction per batch, both in WAL mode with `synchronous = NORMAL` (the store's default), the
 * store's checkpoint interval and exclusive locking (the store holds its file for its one writer process): at
 * least 0.7x. The store's extra work is what keeps the log honest: reading the heads inside the
 * transaction, `checkBatch`, the gapless trigger on every row, and advancing each head.
 *
 * Issue 26's bar: the hash chain (each rune's hash of its predecessor's and its own text) costs at
 * most 5%: the store with it against the same store with `hashChain: false`, in the same run.
 */
export async function benchSqliteAppend(): Promise<boolean> {
  const dir = mkdtempSync(join(tmpdir(), 'runestream-bench-'));
  try {
    // The store holds its file's lock while open: its table definition is read before.
    await sqliteStore(join(dir, 'store.db')).close();
    const definition = new Database(join(dir, 'store.db'), { readonly: true });
    const runesTable = definition.prepare<[], string>(`SELECT sql FROM sqlite_schema WHERE name = 'runes'`).pluck().get()!;
    definition.close();
    const store = sqliteStore(join(dir, 'store.db'));
    const nextForStore = chatActorBatches();

    // The same locking and checkpoints as the store (one writer process per file), so neither pays for shared memory.
    const db = new Database(join(dir, 'raw.db'));
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma(`wal_autocheckpoint = ${WAL_CHECKPOINT_PAGES}`);
    db.exec(runesTable);
    const insert = db.prepare<[string, number, string, string]>('INSERT INTO runes (stream, seq, kind, body) VALUES (?, ?, ?, ?)');
    const insertBatch = db.transaction((runes: readonly Rune[]) => {
      for (const r of runes) insert.run(r.stream, r.seq, r.kind, JSON.stringify({ event: r.event, from: r.from, to: r.to, at: r.at }));
    });
    const nextForRaw = chatActorBatches();
    const unchained = sqliteStore(join(dir, 'unchained.db'), { hashChain: false });
    const nextForUnchained = chatActorBatches();

    // Many short alternating slices rather than a few long ones: on a loaded machine each side
    // gets its share of quiet moments, and each keeps its best slice.
    const [ours, theirs] = await compareAsync(
      10,
      () => measureAsync('runestream sqliteStore.append (runes/s)', BATCH, () => store.append(nextForStore()), 250),
      () => measureAsync('better-sqlite3 prepared INSERT, 1 tx per batch', BATCH, async () => insertBatch(nextForRaw()), 250),
    );

    // Same rows, same text: the first batches of both files must be identical.
    await store.close();
    const stored = new Database(join(dir, 'store.db'), { readonly: true });
    const first = `SELECT stream, seq, kind, body FROM runes WHERE seq <= 50 ORDER BY stream, seq`;
    const same = JSON.stringify(stored.prepare(first).all()) === JSON.stringify(db.prepare(first).all());
    stored.close();
    db.close();
    if (!same) throw new Error('the store and the raw inserts did not write the same rows');

    const ok = report(`sqliteStore: durable appends, batches of ${BATCH} chatActor runes over ${STREAMS} streams (WAL, synchronous=normal)`, ours, theirs, 0.7);
    console.log(`  ratio ${(ours.rate / theirs.rate).toFixed(2)} exactly`);

    const chained = sqliteStore(join(dir, 'chained.db'));
    const nextForChained = chatActorBatches();
    // A 5% bar on a shared machine: many short slices, each side's best.
    const [withChain, withoutChain] = await compareAsync(
      40,
      () => measureAsync('sqliteStore.append, hash chain (runes/s)', BATCH, () => chained.append(nextForChained()), 100),
      () => measureAsync('sqliteStore.append, hashChain: false', BATCH, () => unchained.append(nextForUnchained()), 100),
    );
    await chained.close();
    await unchained.close();
    const chainOk = report('sqliteStore: the hash chain on durable appends (same batches, same run)', withChain, withoutChain, 0.95);
    console.log(`  ratio ${(withChain.rate / withoutChain.rate).toFixed(3)} exactly`);

    // Issue 30's bar: the rune fields (`origin` on every rune; `v` past version 1) cost at most 5%:
    // the same batches with and without them, to two stores in the same run.
    const withFields = sqliteStore(join(dir, 'fields.db'));
    const nextWithFields = chatActorBatches(true);
    const withoutFields = sqliteStore(join(dir, 'no-fields.db'));
    const nextWithoutFields = chatActorBatches(false);
    const [fields, noFields] = await compareAsync(
      40,
      () => measureAsync('sqliteStore.append, runes with origins (runes/s)', BATCH, () => withFields.append(nextWithFields()), 100),
      () => measureAsync('sqliteStore.append, runes without', BATCH, () => withoutFields.append(nextWithoutFields()), 100),
    );
    await withFields.close();
    await withoutFields.close();
    const fieldsOk = report("sqliteStore: the rune's origin on durable appends (same batches, same run)", fields, noFields, 0.95);
    console.log(`  ratio ${(fields.rate / noFields.rate).toFixed(3)} exactly`);
    return ok && chainOk && fieldsOk;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
