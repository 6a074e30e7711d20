import { marbles } from 'rxjs-marbles';
import { describe, expect, it } from 'vitest';
import { createEngine, notices, type Rune, type RuneNotice } from '../../src/index.js';

const userId = '7f1b1f0e-3c1a-4a53-9a36-0c8a0e5f3b21';
const rune = (seq: number, kind: string, event: Rune['event'], from: string | undefined, to: string, machine = 'chat-actor', stream = 'chat-1'): Rune =>
  from === undefined ? { stream, seq, machine, kind, event, to, at: seq } : { stream, seq, machine, kind, event, from, to, at: seq };

const runes: Record<string, Rune> = {
  s: rune(1, 'spawned', { type: 'spawn' }, undefined, 'idle'),
  p: rune(2, 'ProcessInteraction', { type: 'ProcessInteraction', userId }, 'idle', 'running'),
  g: rune(3, 'Ping', { type: 'Ping' }, 'running', 'running'),
  x: rune(4, 'Cancel', { type: 'Cancel', reason: 'user_cancelled' }, 'running', 'cancelled'),
  b: rune(7, 'failure', { type: 'failure' }, 'CLOSED', 'OPEN', 'circuit-breaker', 'provider/a'),
};
const told: Record<string, RuneNotice> = {
  R: { stream: 'chat-1', seq: 2, type: 'state_changed', data: { from_state: 'idle', to_state: 'running', reason: 'Processing user interaction' } },
  C: { stream: 'chat-1', seq: 4, type: 'state_changed', data: { from_state: 'running', to_state: 'cancelled', reason: 'user_cancelled' } },
  S: { stream: 'chat-1', seq: 4, type: 'stopped', data: { reason: 'user_cancelled', partial_response: '' } },
  B: { stream: 'provider/a', seq: 7, type: 'state_changed', data: { from_state: 'CLOSED', to_state: 'OPEN', reason: 'failure' } },
};

describe('notices', () => {
  it(
    "turns runes into seed 000's events: none for a spawn or a self-loop, state_changed then stopped for a terminal state",
    marbles((m) => {
      const runes$ = m.hot('--s--p--g--x----b--|', runes);
      const expected = '    -----R-----(CS)-B--|';
      m.expect(runes$.pipe(notices())).toBeObservable(expected, told);
    }),
  );

  it("is an engine's notices$: its live runes piped through it", async () => {
    const engine = createEngine();
    const seen: string[] = [];
    engine
      .runes$()
      .pipe(notices())
      .subscribe((n) => seen.push(`${n.stream}#${n.seq} ${n.type}`));
    await engine.spawn('chat-1', 'chat-actor');
    await engine.dispatch('chat-1', { type: 'ProcessInteraction', userId });
    await engine.dispatch('chat-1', { type: 'InteractionComplete', success: false, error: 'model down' });
    expect(seen).toEqual(['chat-1#2 state_changed', 'chat-1#3 state_changed', 'chat-1#3 stopped']);
    await engine.close();
  });
});
