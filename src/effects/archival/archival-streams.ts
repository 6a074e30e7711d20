/**
 * The stream ids of archival runs: `archive/<target>`, one run per target (a conversation's
 * stream, or any stream), so that no run id is ever a `conv/` or `chat/` stream, nor under one
 * (a run is never sealed with what it archives).
 */
export const ARCHIVAL_PREFIX = 'archive/';

/** The archival run of `target`: `archive/<target>`. */
export const archivalStream = (target: string): string => `${ARCHIVAL_PREFIX}${target}`;

/** The target of an archival run's stream, or `undefined` for a stream that is not one. */
export const targetOf = (stream: string): string | undefined =>
  stream.startsWith(ARCHIVAL_PREFIX) && stream.length > ARCHIVAL_PREFIX.length ? stream.slice(ARCHIVAL_PREFIX.length) : undefined;
