import { describe, expect, it } from 'vitest';
import { chatActor, circuitBreaker, foldEvents, foldRune, type Rune } from '../../src/index.js';
import { StreamView } from '../../src/server/client/stream-view.js';
import { createEngine, memoryStore } from '../../src/index.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const breakerInput = { failureThreshold: 2, successThreshold: 1, openTimeoutMs: 10 };

describe("foldRune and foldEvents: the one fold of a stream's runes", () => {
  it("starts at seq 1 from the spawn's input, whatever state it is given, then transitions", () => {
    const spawned = foldRune(circuitBreaker, { value: 'stale' }, 1, { type: 'spawn', input: breakerInput });
    expect(spawned).toEqual(circuitBreaker.initial(breakerInput));
    expect(foldRune(circuitBreaker, spawned, 2, { type: 'failure' })).toEqual(circuitBreaker.transition(circuitBreaker.initial(breakerInput), { type: 'failure' }));
  });

  it('leaves the state the same object for a stored event that does not apply (a machine changed since)', () => {
    const cancelled = chatActor.transition(chatActor.initial(), { type: 'Cancel', reason: 'user' });
    expect(foldRune(chatActor, cancelled, 7, { type: 'Ping' })).toBe(cancelled);
  });

  it('folds a log in pages from any seq to the same state as in one go (hydration from a snapshot)', () => {
    const events = [
      { type: 'spawn' },
      { type: 'ProcessInteraction', userId },
      { type: 'InteractionComplete', success: true },
      { type: 'Pause', reason: 'lunch' },
      { type: 'ProcessInteraction', userId },
    ];
    const whole = foldEvents(chatActor, undefined, 0, events);
    expect(whole).toEqual(events.slice(1).reduce((s, e) => chatActor.transition(s, e as never), chatActor.initial()));
    for (let at = 0; at <= events.length; at++) {
      const snapshot = foldEvents(chatActor, undefined, 0, events.slice(0, at));
      expect(foldEvents(chatActor, snapshot, at, events.slice(at))).toEqual(whole);
    }
    expect(foldEvents(chatActor, whole, 5, [])).toBe(whole);
  });

  it("gives the client's stream view the state the engine hydrates from the same log", async () => {
    const store = memoryStore();
    const engine = createEngine({ store });
    await engine.spawn('c', chatActor);
    for (const event of [{ type: 'ProcessInteraction', userId }, { type: 'Pause', reason: 'lunch' }, { type: 'Ping' }, { type: 'ProcessInteraction', userId }]) {
      await engine.dispatch('c', event);
    }
    await engine.dispatch('c', { type: 'Cancel', reason: 'user' });
    const runes: Rune[] = await store.read('c');

    const view = new StreamView('c', { [chatActor.id]: chatActor }, { watch: () => {}, unwatch: () => {} });
    const states: unknown[] = [];
    view.state$.subscribe((state) => states.push(state));
    for (const rune of runes) expect(view.applyRune(rune)).toBe('applied');

    engine.release('c');
    const hydrated = await engine.snapshot('c');
    expect(hydrated).toEqual({ stream: 'c', seq: runes.length, state: states.at(-1) });
    expect(states.at(-1)).toMatchObject({ value: 'cancelled', reason: 'user' });
    await engine.close();
  });
});
