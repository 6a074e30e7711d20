import type { SchedulerAction, SchedulerLike } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { coalesceText } from '../../src/streams/coalesce-text.js';
import { marbleTest, type Marbles } from '../support/marbles.js';

/** Pieces of text are strings; any other value (an end, a command) starts with `!`. */
const coalesced = (m: Marbles, windowMs: number) =>
  coalesceText<string>({ windowMs, scheduler: m.scheduler, textOf: (value) => (value.startsWith('!') ? undefined : value), joined: (text) => text });

/** The test scheduler, but every timer runs `ms` after it was due: a busy process. */
const lateBy = (m: Marbles, ms: number): SchedulerLike => ({
  now: () => m.scheduler.now(),
  schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay = 0, state?: T) {
    return m.scheduler.schedule(work, delay + ms, state);
  },
});

const pieces = { a: 'Hel', b: 'lo', c: ' there', d: '!', e: 'Bye', X: '!done' };

describe('coalesceText: pieces of text held in windows, one value per window', () => {
  it('the first piece passes at once; the pieces of its window pass as one when it ends; a window that ends empty closes, so the next piece passes at once', () =>
    marbleTest((m) => {
      const source = m.cold('-a-b-c-----------------e-|', pieces);
      m.expectObservable(source.pipe(coalesced(m, 10))).toBe('-a---------B-----------e-|', { ...pieces, B: 'lo there' });
    }));

  it('text that keeps coming passes once per window, each window the text of the last', () =>
    marbleTest((m) => {
      const source = m.cold('-a--b--c--b--a--e--|', pieces);
      // Windows open at 1 (a passes), then at 11 (b, c, b held pass), where a and e are held until the end.
      m.expectObservable(source.pipe(coalesced(m, 10))).toBe('-a---------B-------(C|)', { ...pieces, B: 'lo therelo', C: 'HelBye' });
    }));

  it('another value lets the held text pass first, then itself; the window goes on', () =>
    marbleTest((m) => {
      const source = m.cold('-a-bX-c-------------|', pieces);
      m.expectObservable(source.pipe(coalesced(m, 10))).toBe('-a--(bX)---c--------|', pieces);
    }));

  it("the source's end and its error let the held text pass first", () =>
    marbleTest((m) => {
      m.expectObservable(m.cold('-a-b-|', pieces).pipe(coalesced(m, 10))).toBe('-a---(b|)', pieces);
      m.expectObservable(m.cold('-a-b-#', pieces, new Error('HTTP 502')).pipe(coalesced(m, 10))).toBe('-a---(b#)', pieces, new Error('HTTP 502'));
    }));

  it("an unsubscription drops the held text and cancels the window's timer", () =>
    marbleTest((m) => {
      const source = m.cold('-a-b-c------|', pieces);
      m.expectObservable(source.pipe(coalesced(m, 10)), '^----!').toBe('-a---', pieces);
      m.expectSubscriptions(source.subscriptions).toBe('^----!');
    }));

  it('a timer that runs late does not push the next windows back: each ends where it was due, so held pieces wait no longer', () =>
    marbleTest((m) => {
      // A busy process: every timer of the windows runs 2 ms after it was due.
      const operator = coalesceText<string>({ windowMs: 10, scheduler: lateBy(m, 2), textOf: (value) => value, joined: (text) => text });
      // b, c and d each come halfway through a window: held, and let pass 2 ms late (windows due at
      // 10, 20, 30), not 2 ms later each window (c at 24, d at 36).
      const source = m.cold('a----b---------c---------d---------|', pieces);
      m.expectObservable(source.pipe(operator)).toBe('a-----------b---------c---------d--|', pieces);
    }));

  it('a piece that comes once its window was due to end passes at once, with what the window held, without waiting for a late timer', () =>
    marbleTest((m) => {
      // Every timer of the windows runs 5 ms after it was due.
      const operator = coalesceText<string>({ windowMs: 10, scheduler: lateBy(m, 5), textOf: (value) => value, joined: (text) => text });
      // b is held in the window that ends at 10; c comes at 12, before that window's timer (15): b and
      // c pass together at 12, and the next window ends at 20, where it was due: d is held until its
      // timer, due at 20, runs at 25.
      const source = m.cold('a----b------c-d---------------|', pieces);
      m.expectObservable(source.pipe(operator)).toBe('a-----------B------------d----|', { ...pieces, B: 'lo there' });
    }));

  it('a paced stream, a piece a window: every piece passes at once, and no timer is armed', () =>
    marbleTest((m) => {
      let armed = 0;
      const counting: SchedulerLike = {
        now: () => m.scheduler.now(),
        schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay = 0, state?: T) {
          armed++;
          return m.scheduler.schedule(work, delay, state);
        },
      };
      const operator = coalesceText<string>({ windowMs: 10, scheduler: counting, textOf: (value) => value, joined: (text) => text });
      const source = m.cold('a---------b---------c---------d---------e|', pieces);
      m.expectObservable(source.pipe(operator)).toBe('a---------b---------c---------d---------e|', pieces);
      return () => expect(armed).toBe(0);
    }));

  it('a timer a whole window late (a stalled process) starts the next window when it runs: no burst of windows to catch up', () =>
    marbleTest((m) => {
      // Every timer of the windows runs 15 ms after it was due, with windows of 10 ms.
      const operator = coalesceText<string>({ windowMs: 10, scheduler: lateBy(m, 15), textOf: (value) => value, joined: (text) => text });
      // a at 0 opens a window due at 10, run at 25: b passes there, and the next window is due at 35 (c at 50), not at 20 (c at 40).
      const source = m.cold('a-----b--------------------c------------------------e|', pieces);
      m.expectObservable(source.pipe(operator)).toBe('a------------------------b------------------------c--(e|)', pieces);
    }));

  it('windowMs 0: every value passes as it comes', () =>
    marbleTest((m) => {
      const source = m.cold('-a-b-cX-e|', pieces);
      m.expectObservable(source.pipe(coalesced(m, 0))).toBe('-a-b-cX-e|', pieces);
    }));
});
