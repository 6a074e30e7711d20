import type { ToolCallState } from '../../reducers/tool-call/schema.js';
import { errorText } from '../../reducers/error-text.js';
import { checkResultBytes } from './tool-result-limits.js';

/** A JSON value: what a call's `success{output}` carries. */
export type JsonValue = NonNullable<ToolCallState['output']> | null;

/** A tool returned something that JSON cannot carry. */
export class NonJsonOutputError extends TypeError {
  override readonly name = 'NonJsonOutputError';
}

/**
 * A tool's return value as the JSON a `success{output}` rune carries, the way `JSON.stringify`
 * sees it: `toJSON` is honoured (a `Date` becomes its ISO string), `undefined`, functions and
 * symbols are dropped from objects (and become `null` in arrays and at the top), `NaN` and
 * `Infinity` become `null`, a `Map` or `Set` becomes `{}`. A `BigInt` or a cycle throws
 * {@link NonJsonOutputError} naming the tool: the call then ends with `execution_error`. A string
 * over `maxBytes` in UTF-8, or any other value whose JSON is, throws `ToolResultTooLargeError`
 * ("tool result too large: tool "read" returned 2000000 bytes, over 1000000 (maxResultBytes)").
 *
 * @example
 * ```ts
 * import { toJsonOutput } from './json-output.js';
 * console.log(toJsonOutput('read', { at: new Date(0), skip: undefined }));
 * console.log(toJsonOutput('read', undefined));
 * try {
 *   toJsonOutput('read', 1n);
 * } catch (error) {
 *   console.log((error as Error).message);
 * }
 * // Logs:
 * // { at: '1970-01-01T00:00:00.000Z' }
 * // null
 * // tool "read" returned a value that is not JSON: ...
 * ```
 */
export function toJsonOutput(toolName: string, value: unknown, maxBytes = Infinity): JsonValue {
  if (typeof value === 'string') {
    checkResultBytes(toolName, value, maxBytes);
    return value;
  }
  if (value === null || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new NonJsonOutputError(`tool "${toolName}" returned a value that is not JSON: ${errorText(error)}`);
  }
  if (text === undefined) return null;
  checkResultBytes(toolName, text, maxBytes);
  return JSON.parse(text) as JsonValue;
}
