import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Registry } from 'prom-client';

/** A metrics snapshot: every family as prom-client's `registry.getMetricsAsJSON()` gives it, and when (scheduler time, ms). */
export interface MetricsSnapshot {
  readonly at: number;
  readonly metrics: Awaited<ReturnType<Registry['getMetricsAsJSON']>>;
}

/**
 * Where the metrics collector writes its snapshots (seed 002's KV). `init` is its binding check
 * (a rejection is `binding_missing`); a `write` that rejects is the collector's `runtime_error`,
 * after which it retries with backoff until a write succeeds.
 */
export interface MetricsSink {
  /** Checks the sink can be written (a folder exists, a connection opens). Default: nothing to check. */
  init?(): Promise<void>;
  /** Writes the latest snapshot. */
  write(snapshot: MetricsSnapshot): Promise<void>;
}

/**
 * A sink that keeps the latest snapshot in a JSON file, replaced whole on each write (written
 * beside it, then renamed, so a reader never sees half a file). `init` creates its folder.
 *
 * ## Example
 * ```ts
 * import { mkdtempSync, readFileSync } from 'node:fs';
 * import { tmpdir } from 'node:os';
 * import { join } from 'node:path';
 * import { fileMetricsSink } from 'runestream/server';
 * const path = join(mkdtempSync(join(tmpdir(), 'metrics-')), 'stats', 'metrics.json');
 * const sink = fileMetricsSink(path);
 * await sink.init?.();
 * await sink.write({ at: 1000, metrics: [] });
 * console.log(readFileSync(path, 'utf8')); // Logs: {"at":1000,"metrics":[]}
 * ```
 */
export function fileMetricsSink(path: string): MetricsSink {
  if (typeof path !== 'string' || path.length === 0) throw new TypeError(`fileMetricsSink: "path" must be a non-empty string, got ${String(path)}`);
  const temporary = `${path}.writing`;
  return {
    init: async () => {
      await mkdir(dirname(path), { recursive: true });
    },
    write: async (snapshot) => {
      await writeFile(temporary, JSON.stringify(snapshot));
      await rename(temporary, path);
    },
  };
}

/** A sink in memory, for tests and embedding: every snapshot written, in order. */
export interface MemoryMetricsSink extends MetricsSink {
  readonly snapshots: readonly MetricsSnapshot[];
}

/** A {@link MemoryMetricsSink}: keeps every snapshot it is given. */
export function memoryMetricsSink(): MemoryMetricsSink {
  const snapshots: MetricsSnapshot[] = [];
  return {
    snapshots,
    write: async (snapshot) => {
      snapshots.push(snapshot);
    },
  };
}
