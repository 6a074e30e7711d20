import { Observable, identity, type MonoTypeOperatorFunction, type SchedulerLike, type Subscription } from 'rxjs';

/** Options of {@link coalesceText}. */
export interface CoalesceTextOptions<T> {
  /** How long one window lasts, in ms of `scheduler`: at most one value of text passes per window. 0: every value passes as it comes. */
  readonly windowMs: number;
  /** The clock of the windows: the engine's scheduler, so tests run them in virtual time. */
  readonly scheduler: SchedulerLike;
  /** The text a value carries when it is a piece of text; `undefined` for any other value. */
  readonly textOf: (value: T) => string | undefined;
  /** The value carrying the text of one window's pieces, joined. */
  readonly joined: (text: string) => T;
}

/**
 * Coalesces a stream's pieces of text (a model's deltas): a piece that comes when no window is
 * open passes at once and opens one of `windowMs`; the pieces that come while it is open are held,
 * and pass as one (their text joined, by `joined`) when it ends, which opens the next window
 * (from the instant the last was due to end, so a late timer does not push later windows back). A
 * window is a deadline, not a timer: only held text arms one, so a paced stream whose pieces come
 * a window apart costs no timer at all, and a piece that comes once its window was due to end
 * passes at once with what it held, without waiting for a timer a busy process runs late. Any
 * other value (what `textOf` says is not text) first lets the held text pass, then passes itself,
 * so the order of text and the rest is kept; so do the source's end and its error. Nothing is held
 * past the source's end: only an unsubscription drops what a window holds (at most one window's
 * text). So pieces `"Hel"`, `"lo "` and `"there"` at 0, 10 and 20 ms, with windows of 50 ms, pass
 * as `"Hel"` at once, then `"lo there"` at 50 ms (the marble tests in
 * test/streams/coalesce-text.marbles.test.ts show more).
 */
export function coalesceText<T>(options: CoalesceTextOptions<T>): MonoTypeOperatorFunction<T> {
  const { windowMs, scheduler, textOf, joined } = options;
  if (windowMs === 0) return identity;
  return (source) =>
    new Observable<T>((subscriber) => {
      /** The text of the pieces held in the open window, joined. */
      let held: string | undefined;
      /** When the open window ends: a piece from then on opens the next one. */
      let windowEnd = Number.NEGATIVE_INFINITY;
      /** Armed while text is held: lets it pass when its window ends. */
      let timer: Subscription | undefined;
      const release = (): void => {
        if (held === undefined) return;
        const value = joined(held);
        held = undefined;
        subscriber.next(value);
      };
      /**
       * The window after one due to end at `end`, at `now`: it starts where that one was due to
       * end, not now (a timer late by a few ms would otherwise hold every later piece that much
       * longer again, window after window); a whole window late (a stalled process), it starts now,
       * so no burst of windows catches up.
       */
      const nextWindow = (end: number, now: number): number => (now - end < windowMs ? end : now) + windowMs;
      const arm = (): void => {
        const end = windowEnd;
        timer = scheduler.schedule(
          () => {
            timer = undefined;
            if (held === undefined) return;
            windowEnd = nextWindow(end, scheduler.now());
            release();
          },
          Math.max(0, end - scheduler.now()),
        );
      };
      const subscription = source.subscribe({
        next: (value) => {
          const text = textOf(value);
          if (text === undefined) {
            release();
            subscriber.next(value);
            return;
          }
          const now = scheduler.now();
          if (now < windowEnd) {
            held = (held ?? '') + text;
            if (timer === undefined) arm();
          } else if (held === undefined) {
            windowEnd = now + windowMs;
            subscriber.next(value);
          } else {
            // Its window was due to end and its timer has not run yet (a busy process): all of it passes now.
            timer?.unsubscribe();
            timer = undefined;
            windowEnd = nextWindow(windowEnd, now);
            held += text;
            release();
          }
        },
        error: (error: unknown) => {
          release();
          subscriber.error(error);
        },
        complete: () => {
          release();
          subscriber.complete();
        },
      });
      return () => {
        subscription.unsubscribe();
        timer?.unsubscribe();
      };
    });
}
