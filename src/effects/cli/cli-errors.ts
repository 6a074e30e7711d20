/**
 * The stable prefixes of the `process_error{error}` an agent CLI session gets, each followed by
 * `: ` and a sentence:
 * - `unknown_cli`: the session names a CLI the server has not configured (or none, with no default);
 * - `approval_unsupported`: the CLI cannot be answered while it runs (NDJSON) and the session is not in auto-approve mode;
 * - `spawn_failed`: the command could not start (ENOENT, EACCES), naming it;
 * - `idle_timeout`: the process printed no line for the CLI's `idleTimeoutMs`, so it was ended;
 * - `exit_code`: the process exited with a non-zero code (the end of its stderr follows), just before its `process_exit`;
 * - `drive_failed`: the CLI's adapter failed (a protocol error), or could not launch the run (no process was started);
 * - `too_many_sessions`: no process was started, as `maxRunningSessions` or `maxSessionsPerIdentity` (named) were running already.
 */
export type CliErrorCode = 'unknown_cli' | 'approval_unsupported' | 'spawn_failed' | 'idle_timeout' | 'exit_code' | 'drive_failed' | 'too_many_sessions';

/** The longest text after a prefix: the end of a stderr says the most, so the end is kept. */
const MAX_DETAIL = 2000;

/** A `process_error` text: the code, then the sentence (cut at its start to 2,000 characters). */
export const cliError = (code: CliErrorCode, text: string): string => `${code}: ${text.length > MAX_DETAIL ? `…${text.slice(text.length - MAX_DETAIL + 1)}` : text}`;
