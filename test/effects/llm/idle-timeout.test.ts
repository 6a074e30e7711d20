import { TestScheduler } from 'rxjs/testing';
import { describe, expect, it } from 'vitest';
import { idleTimeout } from '../../../src/effects/llm/idle-timeout.js';

const quiet = new Error('quiet too long');

describe('idleTimeout', () => {
  it('errors once the source is quiet for ms, counted from its last value', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      // Values at 0, 6 and 15; then nothing for 10 ms: the error at 25, and the source is let go.
      const source = cold('a 5ms b 8ms c 20ms d');
      expectObservable(source.pipe(idleTimeout(10, scheduler, () => quiet))).toBe('a 5ms b 8ms c 9ms #', undefined, quiet);
      expectSubscriptions(source.subscriptions).toBe('^ 24ms !');
    });
  });

  it('passes a source that never goes quiet that long, and completes with it', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ cold, expectObservable }) => {
      expectObservable(cold('a 8ms b 8ms (c|)').pipe(idleTimeout(10, scheduler, () => quiet))).toBe('a 8ms b 8ms (c|)');
    });
  });

  it('errors at ms when the source says nothing at all', () => {
    const scheduler = new TestScheduler((a, b) => expect(a).toEqual(b));
    scheduler.run(({ cold, expectObservable }) => {
      expectObservable(cold('-').pipe(idleTimeout(10, scheduler, () => quiet))).toBe('10ms #', undefined, quiet);
    });
  });
});
