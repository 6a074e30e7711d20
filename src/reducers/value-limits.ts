import { describePath } from './validate.js';

/**
 * Bounds on an untrusted value (a spawn input, a dispatched event), checked before its schema:
 * what is stored must stay cheap to describe, store and hydrate. Each may be `Infinity`.
 * Whatever the limits, the same walk refuses a string no store can keep (see {@link isStorableText}).
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
 * Why a value was refused: a limit it passed; `forbidden_key` for an own `__proto__` key
 * (JSON.parse makes one; a schema would drop it silently, so it is refused instead); or
 * `invalid_string` for a string or key no store can keep (a NUL character or a lone surrogate:
 * PostgreSQL's jsonb refuses both, so every store refuses them alike).
 */
export interface ValueViolation {
  readonly code: ValueLimitCode | 'forbidden_key' | 'invalid_string';
  /** Names the path, the limit option and its value, e.g. `event.a.b: nested deeper than 64 levels (limits.maxDepth)`. */
  readonly reason: string;
}

/** Checks an untrusted value; `root` names it in the reason (`event`, `input`). */
export type ValueCheck = (value: unknown, root: string) => ValueViolation | undefined;

/**
 * A check of values against `limits`, and of every string and key in them for what no store can
 * keep (`invalid_string`, see {@link isStorableText}), in one walk. It stops at the first
 * violation and never descends past `maxDepth + 1` levels. It allocates nothing for a value within
 * the limits (the path is only built, from the violation up, for a refused one), and a flat object
 * of strings, numbers and booleans costs one key loop: it runs on every dispatch. With
 * `storable: false` it skips the strings' check (only for measuring what that check costs).
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
export function valueCheck(limits: ValueLimits, { storable = true }: { readonly storable?: boolean } = {}): ValueCheck {
  // Locals, not property loads: the walk reads them for every key.
  const { maxDepth, maxStringLength, maxKeys, maxArrayLength } = limits;
  /** Whether a string passes: within the length limit and storable. Inlined by V8: one call per string. */
  const fits = storable
    ? (text: string): boolean => text.length <= maxStringLength && !text.includes('\u0000') && isWellFormed(text)
    : (text: string): boolean => text.length <= maxStringLength;
  /** Why a string `fits` refused is refused. */
  const refusedString = (what: string, text: string, key?: PropertyKey): Found => {
    const path = key === undefined ? [] : [key];
    if (text.length > maxStringLength) {
      return { code: 'string_too_long', detail: `${what} of ${text.length} characters is over ${maxStringLength} (limits.maxStringLength)`, path };
    }
    return { code: 'invalid_string', detail: `${what} ${unstorableDetail(text)}`, path };
  };

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
          if (!fits(item)) return refusedString('a string', item, i);
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
      if (!fits(key)) return refusedString('a key', key);
      if (key === '__proto__') return { code: 'forbidden_key', detail: 'the key "__proto__" is not allowed', path: [] };
      const item: unknown = (value as Record<string, unknown>)[key];
      if (typeof item === 'string') {
        if (!fits(item)) return refusedString('a string', item, key);
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
    const found = typeof value === 'object' && value !== null ? walk(value, 1) : typeof value === 'string' && !fits(value) ? refusedString('a string', value) : undefined;
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

/** `String.prototype.isWellFormed` (ES2024), typed for this project's ES2022 lib. */
const isWellFormed = (text: string): boolean => (text as string & { isWellFormed(): boolean }).isWellFormed();

/**
 * Whether every store can keep `text` as it is: no NUL character (`\u0000`) and no lone
 * surrogate (well-formed UTF-16). PostgreSQL's jsonb and text refuse a NUL, and a lone surrogate
 * does not survive UTF-8 (it comes back as U+FFFD, or jsonb refuses its escape), so the engine
 * refuses both on every store alike, before anything is stored.
 */
export const isStorableText = (text: string): boolean => !text.includes('\u0000') && isWellFormed(text);

/** What makes `text` unstorable, and where: the first NUL, else the first lone surrogate. Only on the refusal path. */
function unstorableDetail(text: string): string {
  const nul = text.indexOf('\u0000');
  if (nul !== -1) return `has a NUL character (\\u0000) at index ${nul}: PostgreSQL cannot keep one, so no store takes it`;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0xd800 || unit > 0xdfff) continue;
    const next = text.charCodeAt(i + 1);
    if (unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      i++; // a pair
      continue;
    }
    return `has a lone surrogate (\\u${unit.toString(16)}) at index ${i}: it is not text UTF-8 can carry, so no store takes it`;
  }
  return 'is storable';
}

/** `text` with each NUL and each lone surrogate replaced by U+FFFD (what a UTF-8 decoder makes of a broken sequence). */
export const storableText = (text: string): string =>
  isStorableText(text) ? text : (text.replaceAll('\u0000', '\ufffd') as string & { toWellFormed(): string }).toWellFormed();

/**
 * `value` with every string and key made storable by {@link storableText}: the same value when
 * nothing needed it, else a copy of the objects and arrays on the way to each change. What an
 * effect produces (a model's delta, a tool's output) goes through it rather than being refused.
 * Nesting past `maxDepth` is left as it is (the limits refuse it anyway).
 */
export function storableValue<T>(value: T, maxDepth = DEFAULT_VALUE_LIMITS.maxDepth): T {
  const clean = (item: unknown, depth: number): unknown => {
    if (typeof item === 'string') return storableText(item);
    if (typeof item !== 'object' || item === null || depth > maxDepth) return item;
    if (Array.isArray(item)) {
      let copy: unknown[] | undefined;
      for (let i = 0; i < item.length; i++) {
        const next = clean(item[i], depth + 1);
        if (next !== item[i]) (copy ??= [...item])[i] = next;
      }
      return copy ?? item;
    }
    let copy: Record<string, unknown> | undefined;
    for (const key in item) {
      const before = (item as Record<string, unknown>)[key];
      const next = clean(before, depth + 1);
      const cleanKey = storableText(key);
      if (next === before && cleanKey === key) continue;
      copy ??= { ...item };
      if (cleanKey !== key) delete copy[key];
      copy[cleanKey] = next;
    }
    return copy ?? item;
  };
  return clean(value, 1) as T;
}
