import type { PoolClient } from 'pg';
import { StoreError } from '../store.js';

/** What `rs_meta.app` holds in a schema this code made. */
export const POSTGRES_APP = 'runestream';
/** The newest schema version this code knows (and creates). */
export const POSTGRES_SCHEMA_VERSION = 2;

/** A PostgreSQL identifier this store accepts (a schema or a channel): lower case, unquoted-safe. */
const IDENTIFIER = /^[a-z_][a-z0-9_]{0,59}$/;

/** Checks an identifier option, naming it and what is allowed. */
export function checkIdentifier(option: string, value: unknown): string {
  if (typeof value !== 'string' || !IDENTIFIER.test(value)) {
    throw new TypeError(`postgresStore: "${option}" must be 1 to 60 of a-z, 0-9 and _, not starting with a digit; got ${JSON.stringify(value)}`);
  }
  return value;
}

/** The SQLSTATEs the append function raises, with its detail as JSON. */
export const SQLSTATE_CONFLICT = 'RSCNF';
export const SQLSTATE_FENCED = 'RSFNC';

/**
 * The tables of schema version 1, and `rs_append`, which commits a batch in one call (one round
 * trip, its own transaction): fences, then each stream's expected seq, then the runes, then the
 * NOTIFY pointer.
 *
 * A tail delivers a rune once its `txid` is below `pg_snapshot_xmin`: every transaction with a
 * lower id has ended. That skips no rune only if a lower position never belongs to a higher
 * transaction id, so `rs_append` takes its transaction id and draws its positions first, together,
 * under a session advisory lock held for just those two steps (not to the commit): whoever drew
 * lower positions got the lower id.
 */
function version1(schema: string): string {
  const q = quoted(schema);
  const positionsLock = `hashtextextended('runestream positions ${schema}', 0)`;
  return `
CREATE TABLE ${q}.rs_meta (app text NOT NULL, schema_version integer NOT NULL);
CREATE TABLE ${q}.rs_streams (
  stream text COLLATE "C" PRIMARY KEY,
  machine text NOT NULL,
  last_seq bigint NOT NULL,
  value text,
  at double precision NOT NULL
);
CREATE TABLE ${q}.rs_runes (
  gpos bigint GENERATED ALWAYS AS IDENTITY,
  stream text COLLATE "C" NOT NULL,
  seq bigint NOT NULL,
  machine text NOT NULL,
  kind text NOT NULL,
  event jsonb NOT NULL,
  from_state text,
  to_state text,
  at double precision NOT NULL,
  payload jsonb,
  writer text,
  restored boolean NOT NULL DEFAULT false,
  txid xid8 NOT NULL DEFAULT pg_current_xact_id(),
  PRIMARY KEY (stream, seq)
);
CREATE UNIQUE INDEX rs_runes_gpos ON ${q}.rs_runes (gpos);
CREATE TABLE ${q}.rs_snapshots (stream text COLLATE "C" PRIMARY KEY, seq bigint NOT NULL, state jsonb NOT NULL);
CREATE TABLE ${q}.rs_fences (lease text PRIMARY KEY, epoch double precision NOT NULL);

${appendFunction(q, positionsLock, false)}

INSERT INTO ${q}.rs_meta (app, schema_version) VALUES ('${POSTGRES_APP}', 1);
`;
}

/**
 * `rs_append`, which commits a batch in one call (one round trip, its own transaction): fences,
 * then each stream's expected seq, then the runes, then the NOTIFY pointer. With `withVersions`
 * (schema version 2), its runes' machine versions and origins too, in two more arrays before the
 * writer: an overload beside version 1's, which processes still running the older code keep calling.
 */
function appendFunction(q: string, positionsLock: string, withVersions: boolean): string {
  return `
CREATE FUNCTION ${q}.rs_append(
  p_channel text,
  p_leases text[], p_epochs double precision[],
  p_streams text[], p_expected bigint[], p_last bigint[], p_machines text[], p_values text[], p_ats double precision[],
  r_streams text[], r_seqs bigint[], r_machines text[], r_kinds text[], r_events text[], r_froms text[], r_tos text[],
  r_ats double precision[], r_payloads text[], ${withVersions ? 'r_vs integer[], r_origins text[], ' : ''}p_writer text
) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  v_newest double precision;
  v_head bigint;
  v_gpos bigint[];
BEGIN
  PERFORM pg_advisory_lock(${positionsLock});
  BEGIN
    PERFORM pg_current_xact_id();
    SELECT array_agg(g ORDER BY g) INTO v_gpos
      FROM (SELECT nextval(pg_get_serial_sequence('${q}.rs_runes', 'gpos')) AS g FROM generate_series(1, array_length(r_streams, 1))) AS drawn;
  EXCEPTION WHEN OTHERS OR query_canceled THEN -- a session lock outlives the statement: never leave it held
    PERFORM pg_advisory_unlock(${positionsLock});
    RAISE;
  END;
  PERFORM pg_advisory_unlock(${positionsLock});
  FOR i IN 1..coalesce(array_length(p_leases, 1), 0) LOOP
    INSERT INTO ${q}.rs_fences AS f (lease, epoch) VALUES (p_leases[i], p_epochs[i])
      ON CONFLICT (lease) DO UPDATE SET epoch = greatest(f.epoch, excluded.epoch)
      RETURNING epoch INTO v_newest;
    IF v_newest > p_epochs[i] THEN
      RAISE EXCEPTION USING ERRCODE = '${SQLSTATE_FENCED}', MESSAGE = 'fenced',
        DETAIL = json_build_object('lease', p_leases[i], 'epoch', p_epochs[i], 'newest', v_newest)::text;
    END IF;
  END LOOP;
  FOR i IN 1..array_length(p_streams, 1) LOOP
    IF p_expected[i] = 0 THEN
      INSERT INTO ${q}.rs_streams (stream, machine, last_seq, value, at)
        VALUES (p_streams[i], p_machines[i], p_last[i], p_values[i], p_ats[i]) ON CONFLICT (stream) DO NOTHING;
    ELSE
      UPDATE ${q}.rs_streams SET last_seq = p_last[i], value = p_values[i], at = p_ats[i]
        WHERE stream = p_streams[i] AND last_seq = p_expected[i];
    END IF;
    IF NOT FOUND THEN
      SELECT last_seq INTO v_head FROM ${q}.rs_streams WHERE stream = p_streams[i];
      RAISE EXCEPTION USING ERRCODE = '${SQLSTATE_CONFLICT}', MESSAGE = 'seq conflict',
        DETAIL = json_build_object('stream', p_streams[i], 'expected', coalesce(v_head, 0) + 1, 'got', p_expected[i] + 1)::text;
    END IF;
  END LOOP;
  ${
    withVersions
      ? `INSERT INTO ${q}.rs_runes (gpos, stream, seq, machine, kind, event, from_state, to_state, at, payload, v, origin, writer)
    OVERRIDING SYSTEM VALUE
    SELECT g, s, n, m, k, e::jsonb, f, t, a, p::jsonb, w, o::jsonb, p_writer
    FROM unnest(v_gpos, r_streams, r_seqs, r_machines, r_kinds, r_events, r_froms, r_tos, r_ats, r_payloads, r_vs, r_origins) AS r(g, s, n, m, k, e, f, t, a, p, w, o);`
      : `INSERT INTO ${q}.rs_runes (gpos, stream, seq, machine, kind, event, from_state, to_state, at, payload, writer)
    OVERRIDING SYSTEM VALUE
    SELECT g, s, n, m, k, e::jsonb, f, t, a, p::jsonb, p_writer
    FROM unnest(v_gpos, r_streams, r_seqs, r_machines, r_kinds, r_events, r_froms, r_tos, r_ats, r_payloads) AS r(g, s, n, m, k, e, f, t, a, p);`
  }
  PERFORM pg_notify(p_channel, v_gpos[array_length(v_gpos, 1)]::text);
  RETURN v_gpos[array_length(v_gpos, 1)];
END
$fn$;
`;
}

/**
 * Schema version 2: each rune's and each snapshot's machine version (`v`, NULL for version 1),
 * each rune's origin (`origin`, NULL for a rune written before runes had origins), and the
 * `rs_append` that writes both of the runes'.
 */
function version2(schema: string): string {
  const q = quoted(schema);
  const positionsLock = `hashtextextended('runestream positions ${schema}', 0)`;
  return `
ALTER TABLE ${q}.rs_runes ADD COLUMN v integer;
ALTER TABLE ${q}.rs_runes ADD COLUMN origin jsonb;
ALTER TABLE ${q}.rs_snapshots ADD COLUMN v integer;
${appendFunction(q, positionsLock, true)}
UPDATE ${q}.rs_meta SET schema_version = 2;
`;
}

/** What brings a schema from each version to the next, by the version it upgrades from. */
const UPGRADES: Readonly<Record<number, (schema: string) => string>> = { 1: version2 };

/** Quotes an identifier checked by {@link checkIdentifier}. */
export const quoted = (identifier: string): string => `"${identifier}"`;

/**
 * Brings `schema` to {@link POSTGRES_SCHEMA_VERSION}, under a transaction-scoped advisory lock on
 * its name, so processes starting at once take turns. Creates the schema and its tables when it
 * has none, and upgrades an older version in place (in the same transaction); refuses with a {@link StoreError} `invalid_database`, before writing anything, a schema
 * that holds tables of another application (no `rs_meta`, or one naming another app) or a newer
 * schema version than this code knows.
 */
export async function migrate(client: PoolClient, schema: string): Promise<void> {
  const q = quoted(schema);
  await client.query('BEGIN');
  try {
    await client.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [`runestream schema ${schema}`]);
    const tables = (await client.query<{ name: string }>(`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, [schema])).rows.map(
      (row) => row.name,
    );
    let version = 0;
    if (tables.length === 0) {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${q}`);
      await client.query(version1(schema));
      version = 1;
    } else {
      const refuse = (found: string): never => {
        throw new StoreError('invalid_database', `PostgreSQL schema "${schema}" is not a runestream schema this code reads: ${found}; nothing was changed`);
      };
      if (!tables.includes('rs_meta')) refuse(`it has tables (${tables.slice(0, 5).join(', ')}${tables.length > 5 ? ', ...' : ''}) but no rs_meta`);
      const meta = (await client.query<{ app: string; schema_version: number }>(`SELECT app, schema_version FROM ${q}.rs_meta`)).rows;
      if (meta.length !== 1) refuse(`rs_meta has ${meta.length} rows, not 1`);
      const { app, schema_version: found } = meta[0]!;
      if (app !== POSTGRES_APP) refuse(`rs_meta names the application "${app}"`);
      if (found > POSTGRES_SCHEMA_VERSION) refuse(`its schema version is ${found}, newer than ${POSTGRES_SCHEMA_VERSION}, the newest this code knows`);
      if (found < 1) refuse(`its schema version is ${found}`);
      version = found;
    }
    // An older version is upgraded in the same transaction, under the same lock.
    for (; version < POSTGRES_SCHEMA_VERSION; version++) await client.query(UPGRADES[version]!(schema));
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}
