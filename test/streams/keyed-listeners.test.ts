import { describe, expect, it } from 'vitest';
import { KeyedListeners } from '../../src/streams/keyed-listeners.js';

const recorder = (log: string[], name: string) => ({ next: (v: number) => log.push(`${name}:${v}`), complete: () => log.push(`${name}:end`) });

describe('KeyedListeners', () => {
  it('calls the listeners of a key only, in the order they came', () => {
    const listeners = new KeyedListeners<number>();
    const log: string[] = [];
    listeners.add('a', recorder(log, 'a1'));
    listeners.add('a', recorder(log, 'a2'));
    listeners.add('b', recorder(log, 'b1'));
    listeners.next('a', 1);
    listeners.next('c', 2); // nobody listens
    expect(log).toEqual(['a1:1', 'a2:1']);
  });

  it('lets a listener leave, or another join, while a value is being handed out: that value goes to the list as it was', () => {
    const listeners = new KeyedListeners<number>();
    const log: string[] = [];
    let removeSecond!: () => void;
    listeners.add('a', {
      next: (v) => {
        log.push(`first:${v}`);
        removeSecond();
        listeners.add('a', recorder(log, 'late'));
      },
      complete: () => {},
    });
    removeSecond = listeners.add('a', recorder(log, 'second'));
    listeners.next('a', 1);
    expect(log).toEqual(['first:1', 'second:1']);
    log.length = 0;
    removeSecond(); // a second removal is harmless
    listeners.next('a', 2);
    expect(log).toEqual(['first:2', 'late:2']);
  });

  it('ends every listener once, and forgets them', () => {
    const listeners = new KeyedListeners<number>();
    const log: string[] = [];
    const remove = listeners.add('a', recorder(log, 'a'));
    listeners.add('b', recorder(log, 'b'));
    listeners.complete();
    listeners.next('a', 1);
    remove();
    expect(log).toEqual(['a:end', 'b:end']);
  });

  it('ends a listener added after the end at once, as a completed Subject does', () => {
    const listeners = new KeyedListeners<number>();
    const log: string[] = [];
    listeners.complete();
    const remove = listeners.add('a', recorder(log, 'late'));
    listeners.next('a', 1);
    remove();
    expect(log).toEqual(['late:end']);
    expect(listeners.has('a')).toBe(false);
  });
});
