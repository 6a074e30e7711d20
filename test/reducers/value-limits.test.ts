import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { describeIssues, describePath } from '../../src/reducers/validate.js';
import { DEFAULT_VALUE_LIMITS, isStorableText, storableText, storableValue, valueCheck, type ValueLimits } from '../../src/reducers/value-limits.js';

/** One value through a check of `limits`. */
const check = (value: unknown, limits: ValueLimits, root: string) => valueCheck(limits)(value, root);

const small: ValueLimits = { maxDepth: 3, maxStringLength: 5, maxKeys: 2, maxArrayLength: 2 };
const off: ValueLimits = { maxDepth: Infinity, maxStringLength: Infinity, maxKeys: Infinity, maxArrayLength: Infinity };

/** `{a: {a: ... {a: leaf}}}`, `levels` objects deep. */
const nested = (levels: number, leaf: unknown = 1): unknown => {
  let value = leaf;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value;
};

describe('valueCheck', () => {
  it('accepts a value exactly at every limit', () => {
    expect(check({ type: 'Ping', tags: ['abcde', 'x'] }, small, 'event')).toBeUndefined();
    expect(check(nested(3), small, 'event')).toBeUndefined();
    expect(check([[[1]]], small, 'input')).toBeUndefined();
    expect(check(undefined, small, 'input')).toBeUndefined();
    expect(check('abcde', small, 'input')).toBeUndefined();
  });

  it('refuses a value one past each limit, with its code, the path, the option and its value', () => {
    expect(check({ type: 'Ping', args: nested(3) }, small, 'event')).toEqual({
      code: 'too_deep',
      reason: 'event.args.a.a: nested deeper than 3 levels (limits.maxDepth)',
    });
    expect(check({ type: 'Ping', list: [1, 'abcdef'] }, small, 'event')).toEqual({
      code: 'string_too_long',
      reason: 'event.list.1: a string of 6 characters is over 5 (limits.maxStringLength)',
    });
    expect(check({ type: 'Ping', o: { abcdef: 1 } }, small, 'event')).toEqual({
      code: 'string_too_long',
      reason: 'event.o: a key of 6 characters is over 5 (limits.maxStringLength)',
    });
    expect(check({ type: 'Ping', o: { a: 1, b: 2, c: 3 } }, small, 'event')).toEqual({
      code: 'too_many_keys',
      reason: 'event.o: more than 2 keys (limits.maxKeys)',
    });
    expect(check({ list: [1, 2, 3] }, small, 'input')).toEqual({
      code: 'array_too_long',
      reason: 'input.list: an array of 3 elements is over 2 (limits.maxArrayLength)',
    });
    expect(check('abcdef', small, 'input')).toEqual({
      code: 'string_too_long',
      reason: 'input: a string of 6 characters is over 5 (limits.maxStringLength)',
    });
  });

  it('refuses an own __proto__ key, as JSON.parse makes one, naming where it is', () => {
    const parsed: unknown = JSON.parse('{"type":"Ping","x":{"__proto__":{"admin":true}}}');
    expect(check(parsed, DEFAULT_VALUE_LIMITS, 'event')).toEqual({
      code: 'forbidden_key',
      reason: 'event.x: the key "__proto__" is not allowed',
    });
    expect(check(parsed, off, 'event')).toMatchObject({ code: 'forbidden_key' });
  });

  it('reports the first violation in key order and stops there', () => {
    expect(check({ a: 'abcdef', b: [1, 2, 3] }, small, 'input')).toMatchObject({ code: 'string_too_long' });
    expect(check({ b: [1, 2, 3], a: 'abcdef' }, small, 'input')).toMatchObject({ code: 'array_too_long' });
  });

  it('never walks past maxDepth + 1: a cyclic value is too deep, not a stack overflow', () => {
    const cyclic: Record<string, unknown> = { type: 'Ping' };
    cyclic.self = cyclic;
    expect(check(cyclic, DEFAULT_VALUE_LIMITS, 'event')).toMatchObject({ code: 'too_deep' });
  });

  it('names a long path by its first and last segments, and cuts long keys', () => {
    const violation = check({ arguments: nested(1_000) }, DEFAULT_VALUE_LIMITS, 'input');
    expect(violation).toEqual({ code: 'too_deep', reason: 'input.arguments.a.a.a.….a.a.a: nested deeper than 64 levels (limits.maxDepth)' });
    const longKey = 'k'.repeat(1_000);
    const reason = check({ [longKey]: [1, 2, 3] }, { ...small, maxStringLength: Infinity }, 'input')?.reason;
    expect(reason).toBe(`input.${'k'.repeat(39)}…: an array of 3 elements is over 2 (limits.maxArrayLength)`);
  });

  it('with every limit Infinity, accepts what the defaults refuse', () => {
    expect(check({ deep: nested(200), long: Array.from({ length: 20_000 }, () => 0) }, off, 'input')).toBeUndefined();
  });
});

describe('isStorableText', () => {
  it('refuses lone surrogates and NUL characters, and accepts pairs', () => {
    expect(isStorableText('chat-1')).toBe(true);
    expect(isStorableText('chat-\u{1F642}')).toBe(true);
    expect(isStorableText('\ud800')).toBe(false);
    expect(isStorableText('a\udc00b')).toBe(false);
    expect(isStorableText('a\u0000b')).toBe(false);
  });
});

describe('valueCheck: strings no store keeps', () => {
  it('refuses a NUL or a lone surrogate in a string or a key with invalid_string, naming the path and where, whatever the limits', () => {
    for (const limits of [DEFAULT_VALUE_LIMITS, off]) {
      expect(check({ type: 'say', text: 'a\u0000b' }, limits, 'event')).toEqual({
        code: 'invalid_string',
        reason: 'event.text: a string has a NUL character (\\u0000) at index 1: PostgreSQL cannot keep one, so no store takes it',
      });
      expect(check({ a: [{ ok: '\u{1F642}' }, { ['k\ud800']: 1 }] }, limits, 'input')).toEqual({
        code: 'invalid_string',
        reason: 'input.a.1: a key has a lone surrogate (\\ud800) at index 1: it is not text UTF-8 can carry, so no store takes it',
      });
      expect(check(['x', 'y\udc00'], limits, 'input')).toMatchObject({
        code: 'invalid_string',
        reason: expect.stringMatching(/^input\.1: a string has a lone surrogate \(\\udc00\) at index 1/),
      });
      expect(check('\u0000', limits, 'input')).toMatchObject({ code: 'invalid_string', reason: expect.stringMatching(/^input: a string has a NUL/) });
    }
    // Length first: a string over the limit is string_too_long, whatever it holds.
    expect(check({ t: '\u0000'.repeat(6) }, small, 'event')).toMatchObject({ code: 'string_too_long' });
    expect(valueCheck(DEFAULT_VALUE_LIMITS, { storable: false })({ t: '\u0000' }, 'event')).toBeUndefined();
  });
});

describe('storableValue', () => {
  it('replaces each NUL and lone surrogate with U+FFFD in strings and keys, copying only what changed', () => {
    expect(storableText('a\u0000b\ud800')).toBe('a\ufffdb\ufffd');
    const clean = { type: 'say', list: [1, 'two', { three: '\u{1F642}' }] };
    expect(storableValue(clean)).toBe(clean);
    const kept = { x: 1 };
    const dirty = { type: 'success', kept, output: { ['k\u0000']: ['ok', 'bad\udc00'] } };
    const made = storableValue(dirty);
    expect(made).toEqual({ type: 'success', kept, output: { 'k\ufffd': ['ok', 'bad\ufffd'] } });
    expect(made.kept).toBe(kept);
    expect(dirty.output).toEqual({ ['k\u0000']: ['ok', 'bad\udc00'] }); // untouched
    expect(check(made, DEFAULT_VALUE_LIMITS, 'event')).toBeUndefined();
  });
});

describe('describeIssues', () => {
  it('describes the first 5 issues and counts the rest, however many there are', () => {
    const parsed = z.array(z.string()).safeParse(Array.from({ length: 10_000 }, (_, i) => i));
    expect(parsed.success).toBe(false);
    const text = describeIssues(parsed.error!.issues);
    expect(text).toBe(
      '0: Invalid input: expected string, received number; 1: Invalid input: expected string, received number; ' +
        '2: Invalid input: expected string, received number; 3: Invalid input: expected string, received number; ' +
        '4: Invalid input: expected string, received number; and 9995 more issues',
    );
  });

  it('cuts each issue to 200 characters and each path segment to 40', () => {
    const issue = { code: 'custom', path: ['x'.repeat(100), 1, 2, 3, 4, 5, 6, 7, 8], message: 'm'.repeat(10_000), input: null } as const;
    const text = describeIssues([issue, issue] as unknown as z.core.$ZodIssue[]);
    const one = `${'x'.repeat(39)}….1.2.3.….6.7.8: ${'m'.repeat(200)}`.slice(0, 199) + '…';
    expect(text).toBe(`${one}; ${one}`);
  });

  it('names the root of an empty path', () => {
    expect(describePath([])).toBe('(root)');
    expect(describePath([], 'event')).toBe('event');
    expect(describeIssues(z.string().safeParse(1).error!.issues)).toBe('(root): Invalid input: expected string, received number');
  });
});
