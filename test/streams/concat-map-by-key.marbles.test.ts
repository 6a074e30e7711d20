import { Observable, lastValueFrom, of, range, toArray, count } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { concatMapByKey } from '../../src/streams/concat-map-by-key.js';
import { marbleTest, type Marbles } from '../support/marbles.js';

/** Values name their key and their place (`a1`: key `a`, first); each one's work takes two frames, then gives the value upper-cased. */
const values = { a: 'a1', b: 'b1', c: 'a2', d: 'a3', u: '?1' };
const keyOf = (value: string): string | undefined => (value.startsWith('?') ? undefined : value[0]);
const work = (m: Marbles) => (value: string) => m.cold('--x|', { x: value.toUpperCase() });
const results = { A: 'A1', B: 'B1', C: 'A2', D: 'A3' };

describe('concatMapByKey: one at a time per key, keys side by side', () => {
  it("a key's value waits for its work before; another key's runs beside it; the result ends when the work does", () =>
    marbleTest((m) => {
      // a2 comes at 3 while a1 works (1-4): it starts at 4; b1 (at 5) runs beside it.
      const source = m.cold('-a-c-b|', values);
      m.expectObservable(source.pipe(concatMapByKey(keyOf, work(m)))).toBe('---A--CB|', results);
    }));

  it('a key whose work ran dry runs its next value at once, and values queued behind one run in order', () =>
    marbleTest((m) => {
      const source = m.cold('-a----c-(d|)', values);
      m.expectObservable(source.pipe(concatMapByKey(keyOf, work(m)))).toBe('---A----C--D|', results);
    }));

  it('skips a value whose key is undefined', () =>
    marbleTest((m) => {
      const source = m.cold('-u-a|', values);
      m.expectObservable(source.pipe(concatMapByKey(keyOf, work(m)))).toBe('-----A|', results);
    }));

  it("an inner error errors the result and stops every key's work", () =>
    marbleTest((m) => {
      const failing = m.cold('-#', undefined, new Error('b failed'));
      const slow = m.cold('-----x|', { x: 'A1' });
      const source = m.cold('-ab|', values);
      m.expectObservable(source.pipe(concatMapByKey(keyOf, (value) => (value === 'b1' ? failing : slow)))).toBe('---#', undefined, new Error('b failed'));
      m.expectSubscriptions(slow.subscriptions).toBe('-^-!');
    }));

  it('a project that throws errors the result', () =>
    marbleTest((m) => {
      const source = m.cold('-a|', values);
      const thrown = new Error('no work for a1');
      m.expectObservable(
        source.pipe(
          concatMapByKey(keyOf, (): Observable<string> => {
            throw thrown;
          }),
        ),
      ).toBe('-#', undefined, thrown);
    }));

  it('unsubscribing stops the work running and starts none of the queued', () =>
    marbleTest((m) => {
      const first = m.cold('-----x|', { x: 'A1' });
      const second = m.cold('x|', { x: 'A2' });
      const source = m.cold('-ac|', values);
      m.expectObservable(source.pipe(concatMapByKey(keyOf, (value) => (value === 'a1' ? first : second))), '^--!').toBe('----');
      m.expectSubscriptions(first.subscriptions).toBe('-^-!');
      m.expectSubscriptions(second.subscriptions).toBe([]);
    }));
});

describe('concatMapByKey with work done at once', () => {
  it('runs a long queue of one key without growing the stack, in order', async () => {
    const done = await lastValueFrom(
      range(0, 200_000).pipe(
        concatMapByKey(
          () => 'k',
          (n) => of(n),
        ),
        count(),
      ),
    );
    expect(done).toBe(200_000);
    const order = await lastValueFrom(
      range(0, 5).pipe(
        concatMapByKey(
          (n) => `k${n % 2}`,
          (n) => of(n),
        ),
        toArray(),
      ),
    );
    expect(order).toEqual([0, 1, 2, 3, 4]);
  });
});
