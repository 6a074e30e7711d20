import { firstValueFrom, from, toArray } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { splitLines } from '../../src/index.js';

const split = (chunks: readonly (string | Uint8Array)[], options?: Parameters<typeof splitLines>[0]) => firstValueFrom(from(chunks).pipe(splitLines(options), toArray()));

describe('splitLines', () => {
  it('joins a line split across chunks and ends the last line without a break when the source completes', async () => {
    expect(await split(['{"type":"say",', '"text":"hi"}\n{"a"', ':1}\n', 'tail'])).toEqual(['{"type":"say","text":"hi"}', '{"a":1}', 'tail']);
  });

  it('drops \\r of \\r\\n and empty lines', async () => {
    expect(await split(['a\r\n\r\n\nb\r', '\n'])).toEqual(['a', 'b']);
  });

  it('decodes a UTF-8 character split across byte chunks', async () => {
    const bytes = new TextEncoder().encode('é✓\n');
    expect(await split([bytes.slice(0, 1), bytes.slice(1, 3), bytes.slice(3)])).toEqual(['é✓']);
  });

  it('cuts a line longer than maxLineLength, drops its rest up to the next break, and says so', async () => {
    const cut: number[] = [];
    expect(await split(['abcdef', 'ghij\nok\n'], { maxLineLength: 4, onOverlong: (kept) => cut.push(kept) })).toEqual(['abcd', 'ok']);
    expect(cut).toEqual([4]);
    expect(await split(['abcdefgh\nok\n'], { maxLineLength: 4 })).toEqual(['abcd', 'ok']);
  });

  it('passes the source error on', async () => {
    await expect(firstValueFrom(from(Promise.reject(new Error('EPIPE'))).pipe(splitLines()))).rejects.toThrow('EPIPE');
  });
});
