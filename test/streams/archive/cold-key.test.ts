import { describe, expect, it } from 'vitest';
import { checkColdKey, checkColdPrefix, streamKeyPart } from '../../../src/index.js';

describe('streamKeyPart', () => {
  it.each([
    ['conv/c1/chat', 'conv%2Fc1%2Fchat'],
    ['..', '%2E.'],
    ['a b~!*', 'a%20b%7E%21%2A'],
    ['é', '%C3%A9'],
  ])('encodes %j as one safe key part %j', (stream, part) => {
    expect(streamKeyPart(stream)).toBe(part);
    expect(() => checkColdKey(`streams/${part}/manifest.json`)).not.toThrow();
    expect(decodeURIComponent(part)).toBe(stream);
  });

  it('keeps long ids distinct and bounded, ending with a hash', () => {
    const a = streamKeyPart(`conv/${'x'.repeat(300)}/a`);
    const b = streamKeyPart(`conv/${'x'.repeat(300)}/b`);
    expect(a).not.toBe(b);
    expect(a).toMatch(/^conv%2Fx+~[0-9a-f]{32}$/);
    expect(a.length).toBeLessThanOrEqual(200);
    const accents = streamKeyPart('é'.repeat(100)); // cut between whole `%XY` escapes
    expect(accents).toMatch(/^(%C3%A9)+~[0-9a-f]{32}$/);
    expect(() => checkColdKey(`streams/${accents}/manifest.json`)).not.toThrow();
  });

  it('gives an id with a lone surrogate a hashed part', () => {
    expect(streamKeyPart('a\uD800')).toMatch(/^~[0-9a-f]{64}$/);
  });
});

describe('checkColdPrefix', () => {
  it('takes a key beginning, and refuses what no key starts with', () => {
    for (const prefix of ['', 'streams/', 'streams/conv', 'a/b/c']) expect(() => checkColdPrefix(prefix)).not.toThrow();
    for (const prefix of ['/', '../', 'a//', 'a/.b/', 'a b']) expect(() => checkColdPrefix(prefix)).toThrow(expect.objectContaining({ code: 'invalid_cold_key' }));
  });
});
