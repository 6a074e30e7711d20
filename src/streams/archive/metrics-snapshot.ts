import { errorText } from '../../reducers/error-text.js';
import { gunzipText, gzipText } from './archive-format.js';
import { coldCall } from './cold-call.js';
import { ArchiveError, type ColdStore } from './cold-store.js';

/** The key of the metrics snapshot taken at `at`: `metrics/<at, zero-padded to 15 digits>.json.gz`, so key order is time order. */
export const metricsSnapshotKey = (at: number): string => `metrics/${String(Math.trunc(at)).padStart(15, '0')}.json.gz`;

/**
 * Writes a metrics snapshot (any JSON object: what the metrics collector hands archival) gzipped
 * to `metrics/<at>.json.gz`, and resolves to its key. A second snapshot at the same `at` replaces
 * the first.
 */
export async function writeMetricsSnapshot(cold: ColdStore, snapshot: object, at: number): Promise<string> {
  if (!Number.isFinite(at) || at < 0) throw new TypeError('writeMetricsSnapshot: "at" is a time in ms (a non-negative number)');
  if (typeof snapshot !== 'object' || snapshot === null) throw new TypeError('writeMetricsSnapshot: "snapshot" is a JSON object');
  const key = metricsSnapshotKey(at);
  const body = await gzipText(JSON.stringify(snapshot));
  await coldCall(`put "${key}"`, () => cold.put(key, body));
  return key;
}

/** The metrics snapshot at `key`, or `undefined` when there is none; `invalid_segment` when it is not gzipped JSON. */
export async function readMetricsSnapshot(cold: ColdStore, key: string): Promise<unknown> {
  const bytes = await coldCall(`get "${key}"`, () => cold.get(key));
  if (bytes === undefined) return undefined;
  try {
    return JSON.parse(await gunzipText(bytes));
  } catch (error) {
    throw new ArchiveError('invalid_segment', `metrics snapshot "${key}" is not gzipped JSON: ${errorText(error)}`, { cause: error });
  }
}
