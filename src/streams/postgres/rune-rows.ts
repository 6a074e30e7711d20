import type { Rune } from '../../reducers/rune.js';

/** The columns of `rs_runes` a rune is rebuilt from, numbers as JS numbers (bigints would come back as strings). */
export const RUNE_COLUMNS = 'stream, seq::float8 AS seq, machine, kind, event, from_state, to_state, at, payload, v, origin';

/** A row of {@link RUNE_COLUMNS}. */
export interface RuneRow {
  stream: string;
  seq: number;
  machine: string;
  kind: string;
  event: Rune['event'];
  from_state: string | null;
  to_state: string | null;
  at: number;
  payload: Rune['payload'] | null;
  /** NULL: version 1 (schema version 2). */
  v: number | null;
  /** NULL: a rune written before runes had origins (schema version 2). */
  origin: Rune['origin'] | null;
}

/** The rune a row holds, as it was appended: no `from`, `to` or `payload` key where it had none. */
export function runeFromRow(row: RuneRow): Rune {
  const rune: Rune = { stream: row.stream, seq: row.seq, machine: row.machine, kind: row.kind, event: row.event, at: row.at };
  if (row.from_state !== null) rune.from = row.from_state;
  if (row.to_state !== null) rune.to = row.to_state;
  if (row.payload !== null) rune.payload = row.payload;
  if (row.v !== null) rune.v = row.v;
  if (row.origin !== null) rune.origin = row.origin;
  return rune;
}

/** A batch's runes as the columns `rs_append` takes, one array per column (JSON as text). */
export function runeColumns(runes: readonly Rune[]): unknown[] {
  const n = runes.length;
  const streams = new Array<string>(n);
  const seqs = new Array<number>(n);
  const machines = new Array<string>(n);
  const kinds = new Array<string>(n);
  const events = new Array<string>(n);
  const froms = new Array<string | null>(n);
  const tos = new Array<string | null>(n);
  const ats = new Array<number>(n);
  const payloads = new Array<string | null>(n);
  const versions = new Array<number | null>(n);
  const origins = new Array<string | null>(n);
  runes.forEach((rune, i) => {
    streams[i] = rune.stream;
    seqs[i] = rune.seq;
    machines[i] = rune.machine;
    kinds[i] = rune.kind;
    events[i] = JSON.stringify(rune.event);
    froms[i] = rune.from ?? null;
    tos[i] = rune.to ?? null;
    ats[i] = rune.at;
    payloads[i] = rune.payload === undefined ? null : JSON.stringify(rune.payload);
    versions[i] = rune.v ?? null;
    origins[i] = rune.origin === undefined ? null : JSON.stringify(rune.origin);
  });
  return [streams, seqs, machines, kinds, events, froms, tos, ats, payloads, versions, origins];
}

/** A batch's streams in order of first appearance, as `rs_append` takes them; `undefined` if a stream's runes are not consecutive. */
export function streamsOf(runes: readonly Rune[]): unknown[] | undefined {
  const index = new Map<string, number>();
  const streams: string[] = [];
  const expected: number[] = [];
  const last: number[] = [];
  const machines: string[] = [];
  const values: (string | null)[] = [];
  const ats: number[] = [];
  for (const rune of runes) {
    let i = index.get(rune.stream);
    if (i === undefined) {
      index.set(rune.stream, (i = streams.length));
      streams.push(rune.stream);
      expected.push(rune.seq - 1);
      machines.push(rune.machine);
    } else if (rune.seq !== last[i]! + 1) return undefined;
    last[i] = rune.seq;
    values[i] = rune.to ?? null;
    ats[i] = rune.at;
  }
  return [streams, expected, last, machines, values, ats];
}
