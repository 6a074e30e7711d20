import type { AnyMachine, RejectionCode } from '../../reducers/machine.js';
import type { Rune } from '../../reducers/rune.js';
import { isStorableText, type ValueLimitCode, type ValueViolation } from '../../reducers/value-limits.js';
import { rejectionChannel, type RejectionReport } from '../diagnostics.js';

/**
 * Why the engine refused a spawn or a dispatch. The machine's own codes, plus:
 * - `unknown_stream`: no stream of that id was spawned.
 * - `invalid_stream`: a dispatch's or spawn's stream id is not a non-empty string, or has a NUL
 *   character or a lone surrogate (no store keeps it as it is), or a spawn's is not where its
 *   machine's instances live (its `streamReason`: an `agent-registration` only at
 *   `agent-def/<its definition's name>`).
 * - `invalid_layout`: a spawn's stream is not where the agent layout puts its machine's instances
 *   (its `layoutReason`: a `turn-engine` only at `<root>/agent/<a>/turn`, an `agent-lifecycle`
 *   only at `<root>/agent/<a>`; see `agentStreams`), where no agent epic would ever run it.
 * - `agent_kind_conflict`: a spawn of one kind of agent where the same agent's other kind exists
 *   (its `otherKindOf`: `<root>/agent/<a>/react` beside `.../turn`, or the reverse), in memory or
 *   only in the store: an agent id has one kind. The reason names the existing stream. Of two
 *   such spawns racing in one engine, the first wins.
 * - `stream_exists`: a second spawn of a stream.
 * - `unknown_machine`: the machine id is not one this engine hosts (or a stored stream's machine is not).
 * - `newer_version`: the stream holds a rune written by a newer version of its machine than this
 *   engine runs (see `Machine.version`); the reason names both versions. Nothing is appended.
 * - `invalid_input`: the spawn input fails the machine's input schema, or has a `__proto__` key.
 * - `too_deep`, `string_too_long`, `too_many_keys`, `array_too_long`: a spawn input or an event
 *   over one of the engine's `limits` (checked before the schema; the reason names the path and limit).
 * - `invalid_string`: a string or object key of a spawn input or an event has a NUL character
 *   (`\u0000`) or a lone surrogate, which no store keeps (PostgreSQL's jsonb refuses both): refused
 *   on every store alike, in the same walk as the limits; the reason names the path, what and where.
 * - `sealed`: the stream is under one whose machine seals it in its state (a closed or archived
 *   conversation's `conv/<c>/...`); the reason names the sealing stream. Known after a restart.
 * - `held`: the event's type is held back by a stream above it in its state (its machine's
 *   `holds`: a paused conversation takes no `start_turn` for `conv/<c>/agent/<a>/turn`); the
 *   reason names that stream and its state. Known after a restart; released when it leaves the state.
 * - `invalid_origin`: the `origin` given to `dispatch`, `spawn` or `submit` is not a
 *   `RuneOrigin` (the reason says what is wrong with it).
 * - `contention`: the dispatch lost the race for its stream's next seq to other writers
 *   `maxRaceLosses` times in a row (each time applied again to the newer state); nothing was
 *   appended. The reason names the stream.
 * - `closed`: the engine is closed.
 *
 * An event with a `__proto__` key is refused as `invalid_event`.
 */
export type EngineRejectionCode =
  | RejectionCode
  | ValueLimitCode
  | 'invalid_string'
  | 'unknown_stream'
  | 'invalid_stream'
  | 'invalid_layout'
  | 'agent_kind_conflict'
  | 'stream_exists'
  | 'unknown_machine'
  | 'newer_version'
  | 'invalid_input'
  | 'invalid_origin'
  | 'contention'
  | 'closed';

/** What `spawn` and `dispatch` resolve to: the durable rune, or why nothing was appended. */
export type DispatchResult = { accepted: true; rune: Rune } | { accepted: false; code: EngineRejectionCode; reason: string };

/** Why a spawn of an existing stream is refused: the machine's words, when it has them. */
export const existsReason = (machine: AnyMachine, stream: string): string => machine.existsReason?.(stream) ?? `stream "${stream}" already exists`;
/** A refusal with `code`, counted on the diagnostics channel while someone listens (metrics). */
export const rejected = (code: EngineRejectionCode, reason: string): DispatchResult => {
  if (rejectionChannel.hasSubscribers) rejectionChannel.publish({ code } satisfies RejectionReport);
  return { accepted: false, code, reason };
};

/**
 * The refusal of a stream id that is not a non-empty string, or that no store keeps as it is (a
 * NUL character; a lone surrogate, which UTF-8 storage would turn into another id); checked by
 * spawn and dispatch alike.
 */
export const notAStreamId = (stream: unknown): DispatchResult | undefined =>
  typeof stream !== 'string' || stream.length === 0
    ? rejected('invalid_stream', `a stream id must be a non-empty string, got ${typeof stream === 'string' ? '""' : typeof stream}`)
    : isStorableText(stream)
      ? undefined
      : rejected('invalid_stream', 'a stream id must have no NUL character (\\u0000) and no lone surrogate: no store keeps this one as it is');

/** A value over the limits, refused with its limit's code; a `__proto__` key with `invalidCode`. */
export const refusedValue = (violation: ValueViolation, invalidCode: 'invalid_event' | 'invalid_input'): DispatchResult =>
  rejected(violation.code === 'forbidden_key' ? invalidCode : violation.code, violation.reason);
