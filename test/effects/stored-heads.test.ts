import { defer } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { describe, expect, it } from 'vitest';
import type { Rune, StreamHead } from '../../src/index.js';
import { storedHeads } from '../../src/effects/stored-heads.js';
import { epicContext } from '../support/epic-context.js';

const rune = (stream: string, from: string, to: string): Rune => ({ stream, seq: 3, machine: 'm', kind: 'k', event: { type: 'k' }, from, to, at: 0 });
const head = (stream: string): StreamHead => ({ stream, machine: 'm', seq: 2, value: 'busy', at: 0 });

describe('storedHeads: what an epic resumes when it starts', () => {
  it('lists the stored heads, skipping streams heard live meanwhile (their first live rune goes to firstLive)', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const live = hot<Rune>('-a-b-a', { a: rune('s1', 'busy', 'busy'), b: rune('s2', 'idle', 'busy') });
      const heads = cold<StreamHead>('----(xyz|)', { x: head('s1'), y: head('s2'), z: head('s3') });
      const first: string[] = [];
      const listed = storedHeads(live, epicContext(scheduler, { streams: () => heads }), { machine: 'm' }, { firstLive: (r) => first.push(`${r.stream}:${r.from}`) });
      expectObservable(listed).toBe('----(z|)', { z: head('s3') });
      // It stops hearing live runes once the listing is done.
      expectSubscriptions(live.subscriptions).toBe('^---!');
      scheduler.flush();
      expect(first).toEqual(['s1:busy', 's2:idle']);
    });
  });

  it('tries a failed listing again after retryBaseMs, doubling, without erroring', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ cold, expectObservable }) => {
      let attempts = 0;
      const heads = defer(() => (++attempts < 3 ? cold<StreamHead>('-#', undefined, new Error('store busy')) : cold<StreamHead>('-(x|)', { x: head('s1') })));
      const listed = storedHeads(cold<Rune>('-'), epicContext(scheduler, { streams: () => heads }), {}, { retryBaseMs: 10 });
      // Fails at 1, again at 1 + 10 + 1, then lists at 12 + 20 + 1.
      expectObservable(listed).toBe('33ms (x|)', { x: head('s1') });
    });
  });
});
