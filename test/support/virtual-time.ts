import type { VirtualTimeScheduler } from 'rxjs';

/** Waits until the event loop has run pending I/O and promise callbacks. */
export const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Waits until the engine is quiet: `count()` (the runes seen so far, say) has not changed for
 * `turns` turns of the event loop, so what the last virtual tick dispatched is durable and every
 * epic has reacted to it before virtual time moves on.
 */
export async function quiet(count: () => number, turns = 3): Promise<void> {
  let seen = count();
  for (let still = 0; still < turns; ) {
    await settle();
    if (count() === seen) still++;
    else [seen, still] = [count(), 0];
  }
}

/**
 * Runs one due time of `scheduler` (every action due then, none later); false when nothing is
 * scheduled. A cancelled action stays queued until its time, and running it does nothing.
 */
export function stepVirtualTime(scheduler: VirtualTimeScheduler): boolean {
  const next = scheduler.actions[0];
  if (next === undefined) return false;
  scheduler.maxFrames = next.delay;
  scheduler.flush();
  return true;
}

/**
 * Runs virtual time one due time at a time, the engine quiet (see {@link quiet}) after each,
 * until `done()` holds or nothing is scheduled; resolves to whether `done()` holds.
 */
export async function runVirtualTimeUntil(scheduler: VirtualTimeScheduler, count: () => number, done: () => boolean, maxSteps = 100_000): Promise<boolean> {
  await quiet(count);
  for (let step = 0; step < maxSteps && !done(); step++) {
    if (!stepVirtualTime(scheduler)) break;
    await quiet(count);
  }
  return done();
}
