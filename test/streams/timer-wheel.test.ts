import { VirtualTimeScheduler } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { describe, expect, it } from 'vitest';
import { timerWheel } from '../../src/streams/timer-wheel.js';

const testScheduler = () => new TestScheduler((a, b) => expect(a).toEqual(b));

describe('timerWheel', () => {
  it('fires each key once its deadline has passed, at the next bucket boundary, in arming order', () => {
    const scheduler = testScheduler();
    scheduler.run(({ flush }) => {
      const fired: string[] = [];
      const wheel = timerWheel<string>(scheduler, 100, (due) => fired.push(`${scheduler.now()}:${due.join(',')}`));
      wheel.set('a', 250);
      wheel.set('b', 210);
      wheel.set('c', 1000);
      flush();
      expect(fired).toEqual(['300:a,b', '1000:c']);
      expect(wheel.size).toBe(0);
    });
  });

  it('moves a deadline that is set again, and forgets a deleted key', () => {
    const scheduler = testScheduler();
    scheduler.run(({ flush, cold }) => {
      const fired: string[] = [];
      const wheel = timerWheel<string>(scheduler, 100, (due) => fired.push(`${scheduler.now()}:${due.join(',')}`));
      wheel.set('a', 500);
      wheel.set('b', 500);
      // At 400 "a" is active again: its clock restarts. "b" is disarmed.
      cold('400ms x').subscribe(() => {
        wheel.set('a', scheduler.now() + 500);
        wheel.delete('b');
      });
      flush();
      expect(fired).toEqual(['900:a']);
    });
  });

  it('fires at once, on the next tick, a deadline already in the past', () => {
    const scheduler = testScheduler();
    scheduler.run(({ flush, cold }) => {
      const fired: number[] = [];
      const wheel = timerWheel<string>(scheduler, 1000, () => fired.push(scheduler.now()));
      cold('5s x').subscribe(() => wheel.set('late', 1200));
      flush();
      expect(fired).toEqual([5000]);
    });
  });

  it('keeps one scheduled action however many keys are armed', () => {
    const scheduler = new VirtualTimeScheduler();
    const wheel = timerWheel<number>(scheduler, 1000, () => {});
    for (let i = 0; i < 10_000; i++) wheel.set(i, 600_000 + (i % 600) * 1000);
    expect(wheel.size).toBe(10_000);
    expect(scheduler.actions.length).toBe(1);
    wheel.dispose();
    expect(wheel.size).toBe(0);
  });

  it('cancels its scheduled action when the keys of its bucket are deleted or moved later', () => {
    const scheduler = new VirtualTimeScheduler();
    const fired: string[] = [];
    const wheel = timerWheel<string>(scheduler, 100, (due) => fired.push(`${scheduler.now()}:${due.join(',')}`));
    wheel.set('a', 250);
    wheel.delete('a');
    expect(scheduler.actions).toHaveLength(0); // nothing left to fire, nothing scheduled
    wheel.set('b', 250);
    wheel.set('c', 900);
    wheel.set('b', 2000); // moved later: the action moves to c's bucket
    expect(scheduler.actions.map((a) => a.delay)).toEqual([900]);
    scheduler.flush();
    expect(fired).toEqual(['900:c', '2000:b']);
  });

  it('refuses a resolution that is not positive, naming it', () => {
    expect(() => timerWheel(new VirtualTimeScheduler(), 0, () => {})).toThrow('timerWheel: "resolutionMs" must be positive, got 0');
  });
});
