import type { SchedulerLike } from 'rxjs';
import type { DispatchRate } from './options.js';

/** A token bucket: `take()` spends one token if there is one. */
export interface TokenBucket {
  take(): boolean;
}

/**
 * A token bucket holding up to `burst` tokens, refilled continuously at `perSecond`, timed by
 * `scheduler.now()` (so a virtual clock drives it in tests). Nothing is scheduled: the refill is
 * computed from the time elapsed whenever a token is asked for.
 */
export function tokenBucket({ perSecond, burst }: DispatchRate, scheduler: SchedulerLike): TokenBucket {
  let tokens = burst;
  let last = scheduler.now();
  return {
    take() {
      const now = scheduler.now();
      tokens = Math.min(burst, tokens + ((now - last) * perSecond) / 1000);
      last = now;
      if (tokens < 1) return false;
      tokens -= 1;
      return true;
    },
  };
}

/** The error message of a request over the limit. */
export const rateLimitMessage = ({ perSecond, burst }: DispatchRate): string =>
  `rate limit exceeded: at most ${perSecond} spawns and dispatches per second, ${burst} at once, per connection (dispatchRate); retry later`;
