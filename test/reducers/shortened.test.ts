import { describe, expect, it } from 'vitest';
import { shortened } from '../../src/reducers/shortened.js';

describe('shortened', () => {
  it('keeps a text within max as it is; cuts a longer one to max, its start, the marker and 8 hex digits of a hash of the whole', () => {
    expect(shortened('clock', 16)).toBe('clock');
    expect(shortened('x'.repeat(16), 16)).toBe('x'.repeat(16));
    const cut = shortened('x'.repeat(250_000), 16);
    expect(cut).toMatch(/^x{7}…[0-9a-f]{8}$/);
    expect(shortened('x'.repeat(250_000), 16)).toBe(cut); // the same text, the same cut
    expect(shortened(`${'x'.repeat(250_000)}y`, 16)).not.toBe(cut); // apart by their end
    expect(shortened('x'.repeat(100), 16, '_')).toMatch(/^x{7}_[0-9a-f]{8}$/);
  });

  it('never splits a surrogate pair', () => {
    const cut = shortened(`${'x'.repeat(6)}😀${'y'.repeat(100)}`, 16);
    expect(cut).toMatch(/^x{6}…[0-9a-f]{8}$/);
    expect(shortened(`${'x'.repeat(5)}😀${'y'.repeat(100)}`, 16)).toMatch(/^x{5}😀…[0-9a-f]{8}$/);
  });
});
