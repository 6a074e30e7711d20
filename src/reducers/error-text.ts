/** The longest text {@link errorText} gives; longer text is cut and ends with `…`. */
export const ERROR_TEXT_MAX_LENGTH = 1000;

/** Causes followed after the error itself: a chain (or a cycle) of causes stays one short line. */
const MAX_CAUSES = 3;

/** What a value that cannot be shown (its every conversion throws) is shown as. */
const UNPRINTABLE = '(an unprintable value)';

/**
 * Any thrown value as one line of text: what an `execution_error{error}`, a server's error frame
 * or the CLI shows. It never throws.
 *
 * 1. An Error: its message (`(no message)` when empty), prefixed by its name when that says more
 *    than "Error"; then `(cause: …)` for its `cause`, up to 3 causes deep.
 * 2. A string as it is; a symbol, `null`, `undefined`, a number or a bigint as `String` gives it.
 * 3. Anything else as JSON, with `[Circular]` for a cycle; if JSON fails (a getter that throws), as
 *    `String` gives it; if that throws too, `(an unprintable value)`.
 * 4. Line breaks become spaces, and the text is cut to {@link ERROR_TEXT_MAX_LENGTH} characters.
 *
 * @example
 * ```ts
 * import { errorText } from 'runestream';
 * console.log(errorText(new Error('disk full')));                                   // Logs: disk full
 * console.log(errorText(new TypeError('x is null')));                               // Logs: TypeError: x is null
 * console.log(errorText(new Error('save failed', { cause: new Error('disk full') }))); // Logs: save failed (cause: disk full)
 * console.log(errorText({ code: 42 }));                                             // Logs: {"code":42}
 * ```
 */
export function errorText(error: unknown): string {
  const text = describe(error, MAX_CAUSES).replace(/\s*[\r\n]+\s*/g, ' ');
  return text.length > ERROR_TEXT_MAX_LENGTH ? `${text.slice(0, ERROR_TEXT_MAX_LENGTH - 1)}…` : text;
}

const describe = (value: unknown, causesLeft: number): string => {
  try {
    if (value instanceof Error) return describeError(value, causesLeft);
    if (typeof value === 'string') return value;
    if (typeof value !== 'object' && typeof value !== 'function') return String(value);
    return JSON.stringify(value, circularAsText()) ?? String(value);
  } catch {
    try {
      return String(value);
    } catch {
      return UNPRINTABLE;
    }
  }
};

const describeError = (error: Error, causesLeft: number): string => {
  const message = String(error.message) || '(no message)';
  const name = String(error.name);
  const text = name && name !== 'Error' ? `${name}: ${message}` : message;
  if (error.cause === undefined) return text;
  return causesLeft > 0 ? `${text} (cause: ${describe(error.cause, causesLeft - 1)})` : `${text} (cause: …)`;
};

/** A JSON.stringify replacer that writes `[Circular]` for an object already on the path to the root. */
const circularAsText = (): ((this: unknown, key: string, value: unknown) => unknown) => {
  const path: unknown[] = [];
  return function (this: unknown, _key, value) {
    if (typeof value !== 'object' || value === null) return value;
    // `this` is the object holding `value`: drop the path below it, it is done.
    const parentAt = path.lastIndexOf(this);
    path.length = parentAt + 1;
    if (path.includes(value)) return '[Circular]';
    path.push(value);
    return value;
  };
};
