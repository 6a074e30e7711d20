import { describe, expect, it } from 'vitest';
import { ERROR_TEXT_MAX_LENGTH, errorText } from '../../src/index.js';

describe('errorText', () => {
  it('shows an Error by its message, with its name when that says more than "Error"', () => {
    expect(errorText(new Error('disk full'))).toBe('disk full');
    expect(errorText(new TypeError('x is null'))).toBe('TypeError: x is null');
    expect(errorText(new Error(''))).toBe('(no message)');
  });

  it('follows a cause, and stops on a cycle of causes', () => {
    expect(errorText(new Error('save failed', { cause: new Error('disk full') }))).toBe('save failed (cause: disk full)');
    expect(errorText(new Error('save failed', { cause: 'EIO' }))).toBe('save failed (cause: EIO)');
    const looped = new Error('a');
    looped.cause = looped;
    expect(errorText(looped)).toBe('a (cause: a (cause: a (cause: a (cause: …))))');
  });

  it('shows strings as they are, and symbols, null, undefined, numbers and bigints as String does', () => {
    expect(errorText('plain')).toBe('plain');
    expect(errorText(Symbol('why'))).toBe('Symbol(why)');
    expect(errorText(null)).toBe('null');
    expect(errorText(undefined)).toBe('undefined');
    expect(errorText(42)).toBe('42');
    expect(errorText(10n)).toBe('10');
  });

  it('shows an object as JSON, a cycle as [Circular], and a repeated (not circular) object in full', () => {
    expect(errorText({ code: 42 })).toBe('{"code":42}');
    const circular: Record<string, unknown> = { code: 1 };
    circular.self = circular;
    expect(errorText(circular)).toBe('{"code":1,"self":"[Circular]"}');
    const shared = { n: 1 };
    expect(errorText({ a: shared, b: shared })).toBe('{"a":{"n":1},"b":{"n":1}}');
  });

  it('never throws: a throwing getter falls back to String, a throwing toString to a fixed text', () => {
    const getter = {
      get boom(): never {
        throw new Error('getter');
      },
      toString: () => 'the thing',
    };
    expect(errorText(getter)).toBe('the thing');
    const nothingWorks = {
      get boom(): never {
        throw new Error('getter');
      },
      toString(): never {
        throw new Error('toString');
      },
    };
    expect(errorText(nothingWorks)).toBe('(an unprintable value)');
    const badError = new Error('x');
    Object.defineProperty(badError, 'message', {
      get() {
        throw new Error('message');
      },
    });
    expect(errorText(badError)).toBe('(an unprintable value)');
    expect(errorText(Object.create(null))).toBe('{}');
  });

  it('keeps to one line of at most ERROR_TEXT_MAX_LENGTH characters', () => {
    expect(errorText(new Error('first line\n  second line\r\nthird'))).toBe('first line second line third');
    const long = errorText(new Error('x'.repeat(5000)));
    expect(long).toHaveLength(ERROR_TEXT_MAX_LENGTH);
    expect(long.endsWith('x…')).toBe(true);
  });
});
