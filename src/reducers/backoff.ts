/** Exponential backoff with full jitter: the client's reconnects and the effects' retries. */
export interface BackoffOptions {
  /** The cap of the first reconnect's delay, in ms; each further attempt doubles it. Default: 500. */
  baseMs?: number;
  /** The largest cap, in ms, however many attempts have failed. Default: 30000. */
  maxMs?: number;
}

export const DEFAULT_BACKOFF = { baseMs: 500, maxMs: 30_000 } as const;

/**
 * The delay before retry `attempt` (1 for the first): `baseMs` doubling per attempt, at most
 * `maxMs`. Every retry in runestream waits this long (effects, archival runs, registrations),
 * or a random part of it ({@link backoffDelay}, the client's reconnects).
 *
 * ## Example
 * ```ts
 * import { exponentialDelay } from 'runestream';
 * console.log([1, 2, 3, 10].map((attempt) => exponentialDelay(attempt, 1000, 5000))); // Logs: [ 1000, 2000, 4000, 5000 ]
 * ```
 */
export function exponentialDelay(attempt: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
}

/**
 * The delay before reconnect attempt `attempt` (1 for the first): exponential backoff with full
 * jitter, `random() * min(maxMs, baseMs * 2 ** (attempt - 1))`. Full jitter spreads the clients a
 * server restart dropped over the whole window instead of bunching them at its edge.
 *
 * ## Example
 * ```ts
 * import { backoffDelay } from 'runestream/client';
 * console.log(backoffDelay(1, { baseMs: 500, maxMs: 30_000 }, () => 0.5));  // Logs: 250
 * console.log(backoffDelay(3, { baseMs: 500, maxMs: 30_000 }, () => 0.5));  // Logs: 1000
 * // Capped: never more than maxMs.
 * console.log(backoffDelay(20, { baseMs: 500, maxMs: 30_000 }, () => 0.5)); // Logs: 15000
 * ```
 */
export function backoffDelay(attempt: number, backoff: Required<BackoffOptions>, random: () => number): number {
  return random() * exponentialDelay(attempt, backoff.baseMs, backoff.maxMs);
}

/** The backoff options with their defaults, checked: a bad value throws a RangeError naming it. */
export function resolveBackoff(options: BackoffOptions = {}): Required<BackoffOptions> {
  const { baseMs = DEFAULT_BACKOFF.baseMs, maxMs = DEFAULT_BACKOFF.maxMs } = options;
  if (!Number.isFinite(baseMs) || baseMs < 0) throw new RangeError(`backoff.baseMs must be a finite number >= 0 (ms), got ${baseMs}`);
  if (!(maxMs >= baseMs)) throw new RangeError(`backoff.maxMs must be >= backoff.baseMs (${baseMs}), got ${maxMs}`);
  return { baseMs, maxMs };
}
