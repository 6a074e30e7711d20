import type { Rune } from '../src/index.js';

/** The streams each batch spreads over. */
export const STREAMS = 10;
/** Runes per batch. */
export const BATCH = 100;

/** The origins the engine records: the interaction a client's (with its identity), its completion an epic's. */
const CLIENT = Object.freeze({ by: 'client', identity: 'user-0b6e7a52' } as const);
const EPIC = Object.freeze({ by: 'epic', epic: 'chatWork' } as const);

/**
 * An endless supply of chatActor runes: each call gives the next batch, `BATCH` runes spread over
 * `STREAMS` streams (a spawn, then ProcessInteraction / InteractionComplete in turn). With
 * `origins`, each rune records its origin as the engine writes it; without, as runes were before.
 */
export function chatActorBatches(origins = false): () => Rune[] {
  const streams = Array.from({ length: STREAMS }, (_, i) => `chat-actor/7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b${String(i).padStart(2, '0')}`);
  const interactions = streams.map((_, i) => ({ type: 'ProcessInteraction', userId: `0b6e7a52-2f7d-4c1e-8d4a-5a1f3c9e21${String(i).padStart(2, '0')}` }));
  const spawn = { type: 'spawn' };
  const complete = { type: 'InteractionComplete', success: true };
  const seqs = new Array<number>(STREAMS).fill(0);
  let at = 0;
  return () => {
    const runes = new Array<Rune>(BATCH);
    for (let i = 0; i < BATCH; i++) {
      const s = i % STREAMS;
      const stream = streams[s]!;
      const seq = ++seqs[s]!;
      at += 3;
      runes[i] =
        seq === 1
          ? { stream, seq, machine: 'chat-actor', kind: 'spawned', event: spawn, to: 'idle', at }
          : seq % 2 === 0
            ? { stream, seq, machine: 'chat-actor', kind: 'ProcessInteraction', event: interactions[s]!, from: 'idle', to: 'running', at }
            : { stream, seq, machine: 'chat-actor', kind: 'InteractionComplete', event: complete, from: 'running', to: 'idle', at };
      if (origins) runes[i]!.origin = runes[i]!.kind === 'InteractionComplete' ? EPIC : CLIENT;
    }
    return runes;
  };
}
