import { describePath } from './validate.js';

/**
 * Bounds on an untrusted value (a spawn input, a dispatched event), checked before its schema:
 * what is stored must stay cheap to describe, store and hydrate. Each may be `Infinity`.
 */
export interface ValueLimits {
  /**
   * How deeply objects and arrays may nest; the value itself is level 1. Default: 64.
   * `Infinity` leaves nesting to the stack (a cyclic value then overflows it, as in a schema).
   */
  readonly maxDepth: number;
  /** The length of a string, and of an object key, in UTF-16 code units. Default: 1,000,000. */
  readonly maxStringLength: number;
  /** Keys of one object (its enumerable ones, as JSON gives). Default: 1,000. */
  readonly maxKeys: number;
  /** Elements of one array. Default: 10,000. */
  readonly maxArrayLength: number;
}

export const DEFAULT_VALUE_LIMITS: ValueLimits = Object.freeze({
  maxDepth: 64,
  maxStringLength: 1_000_000,
  maxKeys: 1_000,
  maxArrayLength: 10_000,
});

/** The code of each limit, as an engine answers it. */
export type ValueLimitCode = 'too_deep' | 'string_too_long' | 'too_many_keys' | 'array_too_long';

/**
 * Why a value was refused: a limit it passed, or `forbidden_key` for an own `__proto__` key
 * (JSON.parse makes one; a schema would drop it silently, so it is refused instead).
 */
export interface ValueViolation {
  readonly code: ValueLimitCode | 'forbidden_key';
  /** Names the path, the limit option and its value, e.g. `event.a.b: nested deeper than 64 levels (limits.maxDepth)`. */
  readonly reason: string;
}

/** Whether every limit is `Infinity`, so checking is pointless. */
export const noValueLimits = (limits: ValueLimits): boolean =>
  limits.maxDepth === Infinity && limits.maxStringLength === Infinity && limits.maxKeys === Infinity && limits.maxArrayLength === Infinity;

/** Checks an untrusted value; `root` names it in the reason (`event`, `input`). */
export type ValueCheck = (value: unknown, root: string) => ValueViolation | undefined;

/**
 * A check of values against `limits`. It stops at the first violation and never descends past
 * `maxDepth + 1` levels. It allocates nothing for a value within the limits (the path is only
 * built, from the violation up, for a refused one), and a flat object of strings, numbers and
 * booleans costs one key loop: it runs on every dispatch.
 *
 * ## Example
 * ```ts
 * import { DEFAULT_VALUE_LIMITS, valueCheck } from './value-limits.js';
 * const check = valueCheck({ ...DEFAULT_VALUE_LIMITS, maxArrayLength: 1 });
 * console.log(check({ type: 'Ping' }, 'event')); // Logs: undefined
 * console.log(check({ type: 'Tag', tags: ['a', 'b'] }, 'event'));
 * // Logs: { code: 'array_too_long', reason: 'event.tags: an array of 2 elements is over 1 (limits.maxArrayLength)' }
 * ```
 */
export function valueCheck(limits: ValueLimits): ValueCheck {
  // Locals, not property loads: the walk reads them for every key.
  const { maxDepth, maxStringLength, maxKeys, maxArrayLength } = limits;

  const stringTooLong = (what: string, length: number, key?: PropertyKey): Found => ({
    code: 'string_too_long',
    detail: `${what} of ${length} characters is over ${maxStringLength} (limits.maxStringLength)`,
    path: key === undefined ? [] : [key],
  });

  /** Walks an object or array at nesting level `depth`; strings and other leaves are checked inline. */
  const walk = (value: object, depth: number): Found | undefined => {
    if (depth > maxDepth) return { code: 'too_deep', detail: `nested deeper than ${maxDepth} levels (limits.maxDepth)`, path: [] };
    if (Array.isArray(value)) {
      const { length } = value;
      if (length > maxArrayLength) {
        return { code: 'array_too_long', detail: `an array of ${length} elements is over ${maxArrayLength} (limits.maxArrayLength)`, path: [] };
      }
      for (let i = 0; i < length; i++) {
        const item: unknown = value[i];
        if (typeof item === 'string') {
          if (item.length > maxStringLength) return stringTooLong('a string', item.length, i);
        } else if (typeof item === 'object' && item !== null) {
          const found = walk(item, depth + 1);
          if (found !== undefined) {
            found.path.push(i);
            return found;
          }
        }
      }
      return undefined;
    }
    let keys = 0;
    // for-in, not Object.keys: no array per object.
    for (const key in value) {
      if (++keys > maxKeys) return { code: 'too_many_keys', detail: `more than ${maxKeys} keys (limits.maxKeys)`, path: [] };
      if (key.length > maxStringLength) return stringTooLong('a key', key.length);
      if (key === '__proto__') return { code: 'forbidden_key', detail: 'the key "__proto__" is not allowed', path: [] };
      const item: unknown = (value as Record<string, unknown>)[key];
      if (typeof item === 'string') {
        if (item.length > maxStringLength) return stringTooLong('a string', item.length, key);
      } else if (typeof item === 'object' && item !== null) {
        const found = walk(item, depth + 1);
        if (found !== undefined) {
          found.path.push(key);
          return found;
        }
      }
    }
    return undefined;
  };

  return (value, root) => {
    const found =
      typeof value === 'object' && value !== null
        ? walk(value, 1)
        : typeof value === 'string' && value.length > maxStringLength
          ? stringTooLong('a string', value.length)
          : undefined;
    if (found === undefined) return undefined;
    return { code: found.code, reason: `${describePath(found.path.reverse(), root)}: ${found.detail}` };
  };
}

/** A violation on its way up: `path` collects keys from the innermost outwards. */
interface Found {
  readonly code: ValueViolation['code'];
  readonly detail: string;
  readonly path: PropertyKey[];
}

/** Whether `text` is well-formed UTF-16 (no lone surrogate), so it survives UTF-8 storage unchanged. */
export const isWellFormedUtf16 = (text: string): boolean => (text as string & { isWellFormed(): boolean }).isWellFormed();
