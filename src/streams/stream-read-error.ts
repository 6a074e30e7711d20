/**
 * Stable codes of the errors reading a stream from an engine fails with, safe to branch on
 * (refusals of a spawn or a dispatch are results, not errors: see `EngineRejectionCode`):
 * - `unknown_stream`: `state$` of a stream that was never spawned.
 * - `unknown_machine`: a stored stream was spawned as a machine this engine does not host.
 * - `runes_missing`: a `runes$` replay found a gap: runes neither in the store when read nor heard
 *   live (pruned by retention, or written by another process).
 * - `log_mismatch`: hydrating a stream, the store's head seq is not where its runes end.
 * - `newer_version`: a rune of the stream was written by a newer version of its machine than this
 *   code runs (`Rune.v` above `Machine.version`); the message names both. Never misread: the
 *   stream is refused until newer code serves it.
 */
export type StreamReadErrorCode = 'unknown_stream' | 'unknown_machine' | 'runes_missing' | 'log_mismatch' | 'newer_version';

/**
 * An engine could not load or read a stream: `state$`, `runes$` and `snapshot` fail with it, and so
 * does a dispatch that had to hydrate the stream (`log_mismatch`). `code` says why; the message names the stream.
 */
export class StreamReadError extends Error {
  override readonly name: string = 'StreamReadError';
  constructor(
    readonly code: StreamReadErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
