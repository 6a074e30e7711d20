/** The schema of a runestream SQLite file: its tables, the triggers that keep every stream gapless, and how older versions are upgraded. */
import type Database from 'better-sqlite3';

/** `PRAGMA application_id` of every runestream file: "RUNE" in ASCII. */
export const SQLITE_APPLICATION_ID = 0x52_55_4e_45;
/**
 * `PRAGMA user_version` of the schema this version writes and reads. Version 1 (no `runes.payload`),
 * version 2 (pruned runes cannot be restored), version 3 (no hash chain), version 4 (no snapshot
 * versions) and version 5 (no rune origins) are upgraded in place
 * when opened (see {@link sqliteStore}).
 */
export const SQLITE_SCHEMA_VERSION = 6;

/**
 * The WAL is copied into the file once it holds this many pages (4 KB each: about 40 MB), where
 * SQLite's default is 1,000. Many sessions' runes each dirty their stream's page, so a commit writes
 * dozens of pages; a checkpoint syncs both files and copies each page once however often the WAL
 * rewrote it. At 400 streaming sessions the default spent about a third of the store's time in checkpoints.
 */
export const WAL_CHECKPOINT_PAGES = 10_000;

/** The oldest schema version this code opens, upgrading it. */
export const OLDEST_SCHEMA_VERSION = 1;

/**
 * A rune continues its stream: its seq is 1 + the stream's last rune, or 1 + its head when all its
 * runes were pruned (or it has none yet). The other triggers keep the last rune >= the head (the
 * head moves only to the last rune; only the oldest runes are deleted), so a batch's runes may go
 * in before it advances the head, and a stream never created has neither: NULL, refused. Or, a
 * pruned rune restored from its archive: 1 below the oldest stored rune (the head when none is
 * left), so restored runes go in newest first and the stream stays gapless (schema version 3).
 */
const RUNES_GAPLESS = `
CREATE TRIGGER runes_gapless BEFORE INSERT ON runes BEGIN
  SELECT RAISE(ABORT, 'runestream: a rune must continue its stream without gap (seq = last seq + 1)')
  WHERE NEW.seq IS NOT 1 + coalesce(
    (SELECT max(seq) FROM runes WHERE stream = NEW.stream),
    (SELECT seq FROM streams WHERE stream = NEW.stream))
  AND NOT (NEW.seq >= 1 AND NEW.seq IS coalesce(
    (SELECT min(seq) FROM runes WHERE stream = NEW.stream),
    1 + (SELECT seq FROM streams WHERE stream = NEW.stream)) - 1);
END;`;

/** What turns each older schema version into the next one, by the version it upgrades from. */
const UPGRADES: Readonly<Record<number, string>> = {
  1: 'ALTER TABLE runes ADD COLUMN payload TEXT;',
  2: `DROP TRIGGER runes_gapless; ${RUNES_GAPLESS}`,
  // The runes already stored keep no hash: each stream's chain starts at its first rune written after.
  3: 'ALTER TABLE runes ADD COLUMN hash INTEGER; ALTER TABLE streams ADD COLUMN hash INTEGER;',
  // The snapshots already saved were folded by version 1 of their machines.
  4: 'ALTER TABLE snapshots ADD COLUMN v INTEGER;',
  // The runes already stored were written before runes had origins: they have none.
  5: 'ALTER TABLE runes ADD COLUMN origin TEXT;',
};

/**
 * The schema. `runes.body` is the rune's JSON without the fields the row already has: `stream`,
 * `seq` and `kind` are columns, and `machine` is kept only when it differs from its stream's; a
 * machine version (`v`) only on the runes that have one.
 * `runes.payload` is the rune's payload as JSON, NULL when it has none (schema version 2);
 * `runes.origin` its origin as JSON (schema version 6): a column of its own, so hydration, which
 * reads the bodies alone, does not parse it.
 * The triggers make the database itself keep each stream gapless, whoever writes to it.
 */
export const SCHEMA = `
CREATE TABLE streams (
  stream  TEXT    NOT NULL PRIMARY KEY,
  machine TEXT    NOT NULL,
  seq     INTEGER NOT NULL CHECK (seq >= 0), -- the last seq: the stream's head
  value   TEXT,                              -- the state name after the last rune
  at      REAL    NOT NULL DEFAULT 0,        -- the last rune's time
  hash    INTEGER                            -- the last rune's chain hash (schema version 4)
) STRICT, WITHOUT ROWID;

-- Resuming effects at start lists streams by machine and state (idle chat actors, executing tool calls).
CREATE INDEX streams_by_state ON streams (machine, value, stream);

CREATE TABLE runes (
  stream TEXT    NOT NULL,
  seq    INTEGER NOT NULL,
  kind   TEXT    NOT NULL,
  body   TEXT    NOT NULL, -- JSON: { machine?, event, from?, to?, at }
  payload TEXT,            -- JSON: the rune's payload; NULL when it has none
  hash   INTEGER,          -- chain hash of the previous rune's hash and this rune's kind, body, payload, origin; NULL: none (see rune-chain.ts)
  origin TEXT,             -- JSON: what its event came from; NULL: written before runes had origins (schema version 6)
  PRIMARY KEY (stream, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE snapshots (
  stream TEXT    NOT NULL PRIMARY KEY,
  seq    INTEGER NOT NULL,
  state  TEXT    NOT NULL, -- JSON
  v      INTEGER           -- the machine version that folded it; NULL: 1 (schema version 5)
) STRICT;

${RUNES_GAPLESS}

CREATE TRIGGER runes_immutable BEFORE UPDATE ON runes BEGIN
  SELECT RAISE(ABORT, 'runestream: runes are immutable');
END;

-- Pruning deletes a stream's oldest runes, and only those its snapshot covers.
CREATE TRIGGER runes_prune BEFORE DELETE ON runes BEGIN
  SELECT RAISE(ABORT, 'runestream: only a stream''s oldest runes, covered by its snapshot, may be deleted')
  WHERE OLD.seq > coalesce((SELECT seq FROM snapshots WHERE stream = OLD.stream), 0)
     OR EXISTS (SELECT 1 FROM runes WHERE stream = OLD.stream AND seq < OLD.seq);
END;

CREATE TRIGGER streams_start BEFORE INSERT ON streams BEGIN
  SELECT RAISE(ABORT, 'runestream: a stream is created once, at seq 0 (its spawn rune is seq 1)')
  WHERE NEW.seq <> 0 OR EXISTS (SELECT 1 FROM streams WHERE stream = NEW.stream);
END;

CREATE TRIGGER streams_head BEFORE UPDATE ON streams BEGIN
  SELECT RAISE(ABORT, 'runestream: a stream keeps its id and machine')
  WHERE NEW.stream IS NOT OLD.stream OR NEW.machine IS NOT OLD.machine;
  SELECT RAISE(ABORT, 'runestream: a stream''s head only moves forward, to its last rune')
  WHERE NEW.seq <> OLD.seq
    AND (NEW.seq < OLD.seq OR NEW.seq IS NOT (SELECT max(seq) FROM runes WHERE stream = NEW.stream));
END;

CREATE TRIGGER streams_kept BEFORE DELETE ON streams BEGIN
  SELECT RAISE(ABORT, 'runestream: streams are never deleted');
END;

-- A snapshot covers runes that exist, and never moves back: pruned runes stay covered.
CREATE TRIGGER snapshots_insert BEFORE INSERT ON snapshots BEGIN
  SELECT RAISE(ABORT, 'runestream: a snapshot must cover existing runes of its stream, and be newer than the one it replaces')
  WHERE NOT EXISTS (SELECT 1 FROM streams WHERE stream = NEW.stream AND seq >= NEW.seq)
     OR NEW.seq < (SELECT seq FROM snapshots WHERE stream = NEW.stream);
END;

CREATE TRIGGER snapshots_update BEFORE UPDATE ON snapshots BEGIN
  SELECT RAISE(ABORT, 'runestream: a snapshot must cover existing runes of its stream, and be newer than the one it replaces')
  WHERE NEW.stream IS NOT OLD.stream OR NEW.seq < OLD.seq
     OR NOT EXISTS (SELECT 1 FROM streams WHERE stream = NEW.stream AND seq >= NEW.seq);
END;

CREATE TRIGGER snapshots_kept BEFORE DELETE ON snapshots BEGIN
  SELECT RAISE(ABORT, 'runestream: snapshots are replaced, never deleted');
END;
`;

/** What a runestream file must hold, checked at open before anything is written. */
export const SCHEMA_OBJECTS: ReadonlyArray<readonly ['table' | 'trigger', string]> = [
  ['table', 'streams'],
  ['table', 'runes'],
  ['table', 'snapshots'],
  ...[...SCHEMA.matchAll(/CREATE TRIGGER (\w+)/g)].map((m) => ['trigger', m[1]!] as const),
];

/**
 * Brings a checked file of an older schema version to {@link SQLITE_SCHEMA_VERSION}, in one
 * transaction under the store's lock: a crash leaves it at its old version, upgraded at the next open.
 */
export function upgrade(db: Database.Database): void {
  const version = Number(db.pragma('user_version', { simple: true }));
  if (version === SQLITE_SCHEMA_VERSION) return;
  const steps: string[] = [];
  for (let from = version; from < SQLITE_SCHEMA_VERSION; from++) steps.push(UPGRADES[from]!);
  db.exec(`BEGIN IMMEDIATE; ${steps.join(' ')} PRAGMA user_version = ${SQLITE_SCHEMA_VERSION}; COMMIT;`);
}
