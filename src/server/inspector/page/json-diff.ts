/** One difference between two JSON values: the path to it, and the value on each side (absent: not there). */
export interface JsonChange {
  readonly path: string;
  readonly before?: unknown;
  readonly after?: unknown;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;

/**
 * The differences between two JSON values, as paths (`a.b[2]`) with the value before and after:
 * what the inspector shows between two seqs of a stream. Objects and arrays are walked; any other
 * change is reported where it happens.
 */
export function jsonDiff(before: unknown, after: unknown, path = ''): JsonChange[] {
  if (Object.is(before, after)) return [];
  if (isObject(before) && isObject(after) && Array.isArray(before) === Array.isArray(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
    return keys.flatMap((key) => {
      const at = Array.isArray(before) ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`;
      if (!(key in after)) return [{ path: at, before: before[key] }];
      if (!(key in before)) return [{ path: at, after: after[key] }];
      return jsonDiff(before[key], after[key], at);
    });
  }
  return [{ path: path === '' ? '(the whole state)' : path, before, after }];
}
