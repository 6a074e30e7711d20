import { from, lastValueFrom, map, toArray } from 'rxjs';
import { marbles } from 'rxjs-marbles';
import { describe, expect, it } from 'vitest';
import { chatActor, circuitBreaker, type ChatActorEvent, type ChatActorState } from '../../src/index.js';
import { reduceWith } from '../../src/streams/reduce-with.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const events: Record<string, ChatActorEvent> = {
  p: { type: 'ProcessInteraction', userId },
  c: { type: 'InteractionComplete', success: true },
  t: { type: 'InactivityTimeout' },
  x: { type: 'Cancel', reason: 'user' },
};
const states: Record<string, ChatActorState> = {
  R: { value: 'running', userId },
  I: { value: 'idle', userId },
  X: { value: 'cancelled', userId, reason: 'user' },
};

describe('reduceWith', () => {
  it(
    'emits each new state and nothing for a rejected event',
    marbles((m) => {
      const source = m.hot('  --p--t--c--x--t--|', events);
      const subs = '          ^----------------!';
      const expected = '      --R-----I--X-----|';
      m.expect(source.pipe(reduceWith(chatActor))).toBeObservable(expected, states);
      m.expect(source).toHaveSubscriptions(subs);
    }),
  );

  it(
    'passes errors through and unsubscribes the source when unsubscribed',
    marbles((m) => {
      const failing = m.cold('--p--#', events, new Error('source failed'));
      m.expect(failing.pipe(reduceWith(chatActor))).toBeObservable('--R--#', states, new Error('source failed'));

      const endless = m.hot('--p--c--', events);
      m.expect(endless.pipe(reduceWith(chatActor)), '^----!').toBeObservable('--R--', states);
      m.expect(endless).toHaveSubscriptions('^----!');
    }),
  );

  it(
    'emits nothing for an empty or silent source',
    marbles((m) => {
      m.expect(m.cold('|').pipe(reduceWith(chatActor))).toBeObservable('|');
      m.expect(m.cold('-').pipe(reduceWith(chatActor))).toBeObservable('-');
    }),
  );

  it('starts from a given state, for machines with input', async () => {
    const start = circuitBreaker.initial({ failureThreshold: 1, successThreshold: 1, openTimeoutMs: 10 });
    const seen = await lastValueFrom(
      from([{ type: 'failure' as const }, { type: 'success' as const }, { type: 'open_timeout_elapsed' as const }]).pipe(
        reduceWith(circuitBreaker, start),
        map((s) => s.value),
        toArray(),
      ),
    );
    // The failure opens it at once (threshold 1); the success in OPEN is only counted.
    expect(seen).toEqual(['OPEN', 'OPEN', 'HALF_OPEN']);
  });
});
