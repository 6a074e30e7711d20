import { EMPTY, defer, of, take, throwError } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { describe, expect, it } from 'vitest';
import { durableDeadline } from '../../src/streams/durable-deadline.js';

const testScheduler = () => new TestScheduler((a, b) => expect(a).toEqual(b));

describe('durableDeadline', () => {
  it('emits at its deadline, then again every retryMs while still subscribed', () => {
    const scheduler = testScheduler();
    scheduler.run(({ expectObservable }) => {
      expectObservable(durableDeadline(5000, 'due', { scheduler, retryMs: 3000 }), '^ 12s !').toBe('5s a 2999ms a 2999ms a', { a: 'due' });
    });
  });

  it('fires at once (on the next tick of its wheel) when the deadline has passed, as after a restart', () => {
    const scheduler = testScheduler();
    scheduler.run(({ expectObservable }) => {
      expectObservable(durableDeadline(-60_000, 'late', { scheduler }).pipe(take(1))).toBe('(a|)', { a: 'late' });
    });
  });

  it('is at most resolutionMs late, and unsubscribing disarms it', () => {
    const scheduler = testScheduler();
    scheduler.run(({ expectObservable }) => {
      expectObservable(durableDeadline(1001, 'a', { scheduler, resolutionMs: 1000 }).pipe(take(1))).toBe('2000ms (a|)', { a: 'a' });
      expectObservable(durableDeadline(1500, 'never', { scheduler }), '^ 1s !').toBe('');
    });
  });

  it('deadlines of one scheduler share one timer wheel: a thousand deadlines, one scheduled action', () => {
    const scheduler = testScheduler();
    const firedAt: number[] = [];
    scheduler.run(() => {
      const before = scheduler.actions.length;
      for (let i = 0; i < 1000; i++)
        durableDeadline(1000 + (i % 3) * 1000, i, { scheduler })
          .pipe(take(1))
          .subscribe(() => firedAt.push(scheduler.now()));
      expect(scheduler.actions.length - before).toBe(1);
    });
    expect(firedAt.filter((t) => t === 1000)).toHaveLength(334);
    expect(firedAt.filter((t) => t === 2000)).toHaveLength(333);
    expect(firedAt.filter((t) => t === 3000)).toHaveLength(333);
  });

  it('reads its holds$ each time it is due and never before: false completes it without emitting, true lets it emit', () => {
    /** Runs `durableDeadline(5000, 'due')` whose holds$ answers `answer` 10 ms after each read (a store read, say), for 10 minutes. */
    const run = (answer: boolean, expected: string) => {
      const scheduler = testScheduler();
      const readAt: number[] = [];
      scheduler.run(({ cold, expectObservable }) => {
        const holds$ = defer(() => {
          readAt.push(scheduler.now());
          return cold('10ms (a|)', { a: answer });
        });
        expectObservable(durableDeadline(5000, 'due', { scheduler, retryMs: 3000, holds$ }), '^ 9s !').toBe(expected, { a: 'due' });
      });
      return readAt;
    };
    // Holding: it emits once the answer is in, and each retry reads it again.
    expect(run(true, '5010ms a 2999ms a')).toEqual([5000, 8000]);
    // No longer holding: it completes, and is not retried.
    expect(run(false, '5010ms |')).toEqual([5000]);
  });

  it('moves to the later instant its holds$ names, reading it again there; an instant passed lets it emit', () => {
    const scheduler = testScheduler();
    const readAt: number[] = [];
    scheduler.run(({ expectObservable }) => {
      // Work seen at 7,000, then none: quiet until 7,000 + 5,000.
      const holds$ = defer(() => {
        readAt.push(scheduler.now());
        return of(scheduler.now() < 12_000 ? 12_000 : true);
      });
      expectObservable(durableDeadline(5000, 'due', { scheduler, retryMs: 60_000, holds$ }), '^ 20s !').toBe('12s a', { a: 'due' });
      expectObservable(durableDeadline(1000, 'passed', { scheduler, holds$: of(500) }).pipe(take(1))).toBe('1s (a|)', { a: 'passed' });
    });
    expect(readAt).toEqual([5000, 12_000]);
  });

  it('emits when its holds$ gives no answer or fails: a read that cannot be made does not keep a deadline from firing', () => {
    const scheduler = testScheduler();
    scheduler.run(({ expectObservable }) => {
      expectObservable(durableDeadline(1000, 'empty', { scheduler, holds$: EMPTY }).pipe(take(1))).toBe('1s (a|)', { a: 'empty' });
      expectObservable(durableDeadline(1000, 'failed', { scheduler, holds$: throwError(() => new Error('store down')) }).pipe(take(1))).toBe('1s (a|)', { a: 'failed' });
      expectObservable(durableDeadline(1000, 'first', { scheduler, holds$: of(true, false) }).pipe(take(1))).toBe('1s (a|)', { a: 'first' });
    });
  });

  it('stops reading its holds$ when unsubscribed while the read is under way', () => {
    const scheduler = testScheduler();
    scheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const answer = cold('1m (t|)', { t: true });
      expectObservable(durableDeadline(1000, 'due', { scheduler, holds$: answer }), '^ 2s !').toBe('');
      expectSubscriptions(answer.subscriptions).toBe('1s ^ 1s !');
    });
  });

  it('refuses a retryMs or resolutionMs that is not positive', () => {
    const scheduler = testScheduler();
    expect(() => durableDeadline(0, 'x', { scheduler, retryMs: 0 })).toThrow('durableDeadline: "retryMs" must be positive, got 0');
    expect(() => durableDeadline(0, 'x', { scheduler, resolutionMs: -1 })).toThrow('"resolutionMs" must be positive');
  });
});
