import { initialTransition, transition } from 'xstate';
import { chatActor, type ChatActorEvent } from '../src/index.js';
import { compare, measure, report } from './harness.js';
import { xstateChatActor } from './xstate-chat-actor.js';

/**
 * Issue 2's bar: `chatActor.transition` in a bare loop against XState 5's pure `transition()`
 * on the same machine with the same events: at least 25x.
 */
export function benchChatActorTransition(): boolean {
  const events: ChatActorEvent[] = [
    { type: 'ProcessInteraction', userId: '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21' },
    { type: 'InteractionComplete', success: true },
  ];

  let ours = chatActor.initial();
  const oursBatch = 100_000;
  const runOurs = () => {
    let s = ours;
    for (let i = 0; i < oursBatch; i++) s = chatActor.transition(s, events[i & 1]!);
    ours = s;
  };

  let theirs = initialTransition(xstateChatActor)[0];
  const theirsBatch = 1_000; // XState is ~100x slower: a smaller batch keeps the time checks fine-grained.
  const runTheirs = () => {
    let s = theirs;
    for (let i = 0; i < theirsBatch; i++) s = transition(xstateChatActor, s, events[i & 1]!)[0];
    theirs = s;
  };

  const [a, b] = compare(
    3,
    () => measure('runestream chatActor.transition', oursBatch, runOurs, 500),
    () => measure('xstate 5 transition(machine, snapshot, event)', theirsBatch, runTheirs, 500),
  );
  // Both loops end where they began (an even number of alternating events): check they agree.
  if (ours.value !== 'idle' || theirs.value !== 'idle') {
    throw new Error(`the two machines disagree: ${ours.value} vs ${String(theirs.value)}`);
  }
  return report('chatActor: pure transition, alternating ProcessInteraction / InteractionComplete', a, b, 25);
}
