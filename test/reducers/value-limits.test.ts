import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { describeIssues, describePath } from '../../src/reducers/validate.js';
import { DEFAULT_VALUE_LIMITS, isWellFormedUtf16, noValueLimits, valueCheck, type ValueLimits } from '../../src/reducers/value-limits.js';

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
    expect(noValueLimits(off)).toBe(true);
    expect(noValueLimits(DEFAULT_VALUE_LIMITS)).toBe(false);
    expect(check({ deep: nested(200), long: Array.from({ length: 20_000 }, () => 0) }, off, 'input')).toBeUndefined();
  });
});

describe('isWellFormedUtf16', () => {
  it('refuses lone surrogates and accepts pairs', () => {
    expect(isWellFormedUtf16('chat-1')).toBe(true);
    expect(isWellFormedUtf16('chat-\u{1F642}')).toBe(true);
    expect(isWellFormedUtf16('\ud800')).toBe(false);
    expect(isWellFormedUtf16('a\udc00b')).toBe(false);
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
