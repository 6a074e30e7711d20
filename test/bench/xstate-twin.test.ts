import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { initialTransition, transition } from 'xstate';
import { xstateChatActor } from '../../bench/xstate-chat-actor.js';
import { chatActor, type ChatActorEvent } from '../../src/index.js';

// The benchmark is only fair if its XState anchor is the same machine: same states, same context.
describe('the XState anchor of the chatActor benchmark', () => {
  it('agrees with chatActor on every random event sequence', () => {
    const event: fc.Arbitrary<ChatActorEvent> = fc.oneof(
      fc.constant({ type: 'ProcessInteraction' as const, userId: '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21' }),
      fc.constant({ type: 'Pause' as const, reason: 'p' }),
      fc.constant({ type: 'Cancel' as const, reason: 'c' }),
      fc.constant({ type: 'Ping' as const }),
      fc.constant({ type: 'Shutdown' as const }),
      fc.boolean().map((success) => ({ type: 'InteractionComplete' as const, success, error: 'e' })),
      fc.constant({ type: 'InactivityTimeout' as const }),
      fc.constant({ type: 'Error' as const, error: 'boom' }),
    );
    fc.assert(
      fc.property(fc.array(event, { maxLength: 30 }), (events) => {
        let ours = chatActor.initial();
        let theirs = initialTransition(xstateChatActor)[0];
        for (const e of events) {
          ours = chatActor.transition(ours, e);
          theirs = transition(xstateChatActor, theirs, e)[0];
          const { value, ...context } = ours;
          expect(theirs.value).toBe(value);
          expect(Object.fromEntries(Object.entries(theirs.context).filter(([, v]) => v !== undefined))).toEqual(
            Object.fromEntries(Object.entries(context).filter(([, v]) => v !== undefined)),
          );
        }
      }),
      { numRuns: 300 },
    );
  });
});
