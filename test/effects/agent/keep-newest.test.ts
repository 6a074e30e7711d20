import { describe, expect, it } from 'vitest';
import { keepNewest } from '../../../src/effects/agent/keep-newest.js';

describe('keepNewest: a memory of what is not durable yet, bounded', () => {
  it('forgets the oldest entry beyond the bound; setting a key again makes it the newest', () => {
    const map = new Map<string, number>();
    keepNewest(map, 'a', 1, 2);
    keepNewest(map, 'b', 2, 2);
    keepNewest(map, 'a', 3, 2); // a is the newest now
    keepNewest(map, 'c', 4, 2); // b, the oldest, is forgotten
    expect([...map]).toEqual([
      ['a', 3],
      ['c', 4],
    ]);
  });
});
