/**
 * An error as the one line a call's `execution_error{error}` carries: an Error's message (with its
 * name when that says more than "Error"), a string as it is, anything else as JSON.
 *
 * @example
 * ```ts
 * errorText(new Error('disk full'));      // 'disk full'
 * errorText(new TypeError('x is null'));  // 'TypeError: x is null'
 * errorText({ code: 42 });                // '{"code":42}'
 * ```
 */
export function errorText(error: unknown): string {
  if (error instanceof Error) {
    const message = error.message || '(no message)';
    return error.name && error.name !== 'Error' ? `${error.name}: ${message}` : message;
  }
  if (typeof error === 'string') return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}
