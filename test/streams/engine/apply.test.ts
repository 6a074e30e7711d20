import { describe, expect, it } from 'vitest';
import { CALLER_ORIGIN, type RuneOrigin } from '../../../src/reducers/rune-origin.js';
import { chatActor, conversation, memoryStore, type Rune } from '../../../src/index.js';
import { CommitQueue } from '../../../src/streams/commit-queue.js';
import { applyEvent } from '../../../src/streams/engine/apply.js';
import { durableInstance, type Instance } from '../../../src/streams/engine/instance.js';
import type { DispatchResult } from '../../../src/streams/engine.js';
import { Seals } from '../../../src/streams/seals.js';
import type { DispatchSink } from '../../../src/streams/submit.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const machines = { [chatActor.id]: chatActor, [conversation.id]: conversation };

/** `applyEvent` over a memory store holding `stream`'s spawn, as the engine calls it; every outcome and queued rune logged. */
async function applying(stream = 'chat-1') {
  const store = memoryStore();
  const spawn: Rune = { stream, seq: 1, machine: chatActor.id, kind: 'spawned', event: { type: 'spawn' }, to: 'idle', at: 100 };
  await store.append([spawn]);
  const seals = new Seals(store, machines);
  const queued: Rune[] = [];
  const commits = new CommitQueue<Instance>(store, {
    published: (_instance, rune) => queued.push(rune),
    refused: () => {},
    lost: () => {},
    committed: () => undefined,
  });
  const instance = durableInstance(stream, chatActor, chatActor.initial(), 1, 100, 1);
  const outcomes: DispatchResult[] = [];
  const sink: DispatchSink<null> = { result: (result) => outcomes.push(result), error: (error) => outcomes.push({ accepted: false, code: 'closed', reason: String(error) }) };
  const apply = (event: unknown, at: number, origin: RuneOrigin = CALLER_ORIGIN) => applyEvent(instance, event, at, origin, sink, null, seals, commits);
  return { apply, instance, outcomes, queued, seals };
}

describe('applyEvent: one event on an instance in memory', () => {
  it('steps the instance and queues its rune: from and to, the next seq, the dispatch time but never earlier than the last rune, its origin', async () => {
    const { apply, instance, outcomes, queued } = await applying();
    apply({ type: 'ProcessInteraction', userId }, 250);
    apply({ type: 'InteractionComplete', success: true }, 200, { by: 'epic', epic: 'chatWork' }); // dispatched "earlier": stamped with the last rune's time
    expect(queued).toEqual([
      {
        stream: 'chat-1',
        seq: 2,
        machine: 'chat-actor',
        kind: 'ProcessInteraction',
        event: { type: 'ProcessInteraction', userId },
        from: 'idle',
        to: 'running',
        at: 250,
        origin: { by: 'client' },
      },
      {
        stream: 'chat-1',
        seq: 3,
        machine: 'chat-actor',
        kind: 'InteractionComplete',
        event: { type: 'InteractionComplete', success: true },
        from: 'running',
        to: 'idle',
        at: 250,
        origin: { by: 'epic', epic: 'chatWork' },
      },
    ]);
    expect(queued.every((rune) => !('payload' in rune))).toBe(true); // no payload key where the step gives none
    expect(outcomes.map((o) => o.accepted)).toEqual([true, true]);
    expect(instance).toMatchObject({ seq: 3, durableSeq: 3, at: 250 });
  });

  it('refuses, queuing nothing and leaving the instance as it was, an event its schema or its state refuses', async () => {
    const { apply, instance, outcomes, queued } = await applying();
    apply({ type: 'ProcessInteraction', userId: 'not a uuid' }, 1);
    apply({ type: 'Nope' }, 1);
    apply({ type: 'InteractionComplete', success: true }, 1); // not allowed in idle
    expect(outcomes.map((o) => (o.accepted ? 'accepted' : o.code))).toEqual(['invalid_event', 'unknown_event', 'not_allowed']);
    expect(queued).toEqual([]);
    expect(instance).toMatchObject({ seq: 1, at: 100, state: chatActor.initial() });
  });

  it('refuses every event under a sealed stream, and the held types under a holding one, naming the stream above', async () => {
    const sealed = await applying('conv-1/chat');
    sealed.seals.reached('conv-1', conversation.id, 'closed');
    sealed.apply({ type: 'ProcessInteraction', userId }, 1);
    expect(sealed.outcomes).toEqual([{ accepted: false, code: 'sealed', reason: 'stream "conv-1/chat" is sealed: conversation "conv-1" is closed' }]);
    const held = await applying('conv-2/chat');
    held.seals.reached('conv-2', conversation.id, 'paused');
    held.apply({ type: 'start_turn' }, 1);
    held.apply({ type: 'ProcessInteraction', userId }, 1); // not a held type: applied
    expect(held.outcomes.map((o) => (o.accepted ? 'accepted' : `${o.code}: ${o.reason}`))).toEqual([
      'held: event "start_turn" is held back: conversation "conv-2" is paused (its streams take no start_turn until it is not)',
      'accepted',
    ]);
    held.seals.reached('conv-2', conversation.id, 'active'); // released: a new seal generation, looked up again
    held.apply({ type: 'InteractionComplete', success: true }, 1);
    expect(held.outcomes.at(-1)?.accepted).toBe(true);
    expect(sealed.queued).toEqual([]);
  });
});
