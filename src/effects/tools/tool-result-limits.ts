import { storableValue, type ValueCheck, type ValueLimitCode, type ValueViolation } from '../../reducers/value-limits.js';
import type { ToolCallEvent } from '../../reducers/tool-call/schema.js';

/**
 * The default of a tool's `maxResultBytes`: 1,000,000 bytes, the engine's default
 * `limits.maxStringLength`: a text within it (a string output, or an output's JSON, which a ReAct
 * agent stores as a string) is within that limit too, whatever its characters (a UTF-16 unit is
 * at least one UTF-8 byte).
 */
export const DEFAULT_MAX_TOOL_RESULT_BYTES = 1_000_000;

/** Checks a `maxResultBytes` option: a positive integer or `Infinity`; `who` names the caller in the error. */
export function checkMaxResultBytes(who: string, maxResultBytes: unknown): void {
  if (maxResultBytes !== Infinity && !(Number.isInteger(maxResultBytes) && (maxResultBytes as number) > 0)) {
    throw new TypeError(`${who}: "maxResultBytes" must be a positive integer or Infinity, got ${String(maxResultBytes)}`);
  }
}

/** What a tool result past a limit is refused with: the start of its call's `execution_error`. */
export const RESULT_TOO_LARGE = 'tool result too large';

/** A tool's result is over its `maxResultBytes`: the call ends with `execution_error` saying so. */
export class ToolResultTooLargeError extends RangeError {
  override readonly name = 'ToolResultTooLargeError';
}

/** The refusal of a result of `bytes` over `maxBytes`, for a tool or an MCP server (`what`). */
export const resultTooLarge = (what: string, bytes: number | string, maxBytes: number): ToolResultTooLargeError =>
  new ToolResultTooLargeError(`${RESULT_TOO_LARGE}: ${what} returned ${bytes} bytes, over ${maxBytes} (maxResultBytes)`);

/**
 * Throws {@link ToolResultTooLargeError} if `text` (a string output, or an output's JSON) is over
 * `maxBytes` in UTF-8. Counted only when it could be over: a text of n UTF-16 units is at most 3n bytes.
 */
export function checkResultBytes(toolName: string, text: string, maxBytes: number): void {
  if (text.length * 3 <= maxBytes) return;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) throw resultTooLarge(`tool "${toolName}"`, bytes, maxBytes);
}

/** The engine's limits that bound a value's size. */
const SIZE_LIMITS: ReadonlySet<ValueViolation['code']> = new Set<ValueLimitCode>(['too_deep', 'string_too_long', 'too_many_keys', 'array_too_long']);

/**
 * A call's outcome as it can be stored: a `success` the engine would refuse (its output past one
 * of the engine's `limits`: a string too long, nesting too deep, too many keys, an array too
 * long) becomes `execution_error` "tool result too large: <path>: <the limit>" (a `__proto__` key:
 * "tool result refused: <path>: ..."), so the call ends with a result the model hears instead of
 * staying `executing`. Any other event, and any other violation, is left as it is, to the engine.
 * `check` is the engine's own check (`EpicContext.valueCheck`); absent, nothing is checked.
 */
export function storableOutcome(event: ToolCallEvent, check: ValueCheck | undefined): ToolCallEvent {
  if (event.type !== 'success' || check === undefined) return event;
  // Checked as the engine will store it (a NUL or a lone surrogate cleaned), so a size limit past such a string is still found here.
  const violation = check(storableValue(event), 'event');
  if (violation === undefined) return event;
  if (SIZE_LIMITS.has(violation.code)) return { type: 'execution_error', error: `${RESULT_TOO_LARGE}: ${violation.reason}` };
  if (violation.code === 'forbidden_key') return { type: 'execution_error', error: `tool result refused: ${violation.reason}` };
  return event; // left to the engine's dispatch, which decides what it does with it
}
