import { defer, of, type Observable } from 'rxjs';
import { describe, it } from 'vitest';
import type { EpicCommand, Rune, Snapshot, TurnEngineState } from '../../src/index.js';
import { chatTalk } from '../../src/effects/chat-talk.js';
import { epicContext } from '../support/epic-context.js';
import { marbleTest, type Marbles } from '../support/marbles.js';

/**
 * The `chatTalk` epic alone, under `TestScheduler.run`: a hot observable of runes in (the chat
 * actor's and its agent's turn), commands out; the context answers the turn's snapshot at once,
 * so every command comes in the frame of the rune that asked for it.
 */

const ACTOR = 'chat/c1/actor/1';
const TURN = 'chat/c1/agent/assistant/turn';

const actorRune = (seq: number, event: Rune['event'], from: string, to: string): Rune => ({
  stream: ACTOR,
  seq,
  machine: 'chat-actor',
  kind: event.type,
  event,
  from,
  to,
  at: 0,
});
const turnRune = (seq: number, event: Rune['event'], from: string, to: string, kind = event.type): Rune => ({
  stream: TURN,
  seq,
  machine: 'turn-engine',
  kind,
  event,
  from,
  to,
  at: 0,
});

const interaction = (seq = 2, message = 'hello') => actorRune(seq, { type: 'ProcessInteraction', userId: 'u1', message }, 'idle', 'running');
const started = turnRune(3, { type: 'start_turn', input: 'hello' }, 'idle', 'streaming', 'turn.started');
// A turn's ending leaves it idle again, in the same rune.
const completed = turnRune(5, { type: 'response_done' }, 'streaming', 'idle', 'turn.completed');
const failed = turnRune(5, { type: 'stream_error', error: 'HTTP 503' }, 'streaming', 'idle', 'turn.error');

const toActor = (event: EpicCommand extends infer C ? (C extends { event: infer E } ? E : never) : never): EpicCommand => ({ stream: ACTOR, event });
const spawnTurn: EpicCommand = { stream: TURN, spawn: 'turn-engine', input: { agentId: 'assistant' } };
const startTurn = (input = 'hello'): EpicCommand => ({ stream: TURN, event: { type: 'start_turn', input } });

/**
 * A context in which the chat agent's turn is `turn` (undefined: the chat has no turn stream yet),
 * then whatever state the turn runes on `runes` lead to (heard before the epic hears them).
 */
const withTurn = (m: Marbles, turn: TurnEngineState['value'] | undefined, runes?: Observable<Rune>) => {
  let value = turn;
  runes?.subscribe((rune) => {
    if (rune.stream === TURN) value = rune.to as TurnEngineState['value'];
  });
  return epicContext(m.scheduler, {
    snapshot: <S>(stream: string) =>
      defer(() => of(stream === TURN && value !== undefined ? ({ stream, seq: 4, state: { value, turn: 1 } as unknown as S } satisfies Snapshot<S>) : undefined)),
  });
};

describe('chatTalk: a ProcessInteraction is a turn of the chat agent; its end is InteractionComplete', () => {
  it("a chat's first interaction spawns the agent's turn stream and starts the turn; the completed turn completes the interaction", () =>
    marbleTest((m) => {
      const runes = m.hot<Rune>('-r-s-c', { r: interaction(), s: started, c: completed });
      m.expectObservable(chatTalk()(runes, withTurn(m, undefined), undefined)).toBe('-(ab)c', {
        a: spawnTurn,
        b: startTurn(),
        c: toActor({ type: 'InteractionComplete', success: true }),
      });
    }));

  it("a failed turn fails the interaction with the turn's error; an idle turn stream is reused, not spawned again", () =>
    marbleTest((m) => {
      const runes = m.hot<Rune>('-r-s-f', { r: interaction(), s: started, f: failed });
      m.expectObservable(chatTalk()(runes, withTurn(m, 'idle'), undefined)).toBe('-b---c', {
        b: startTurn(),
        c: toActor({ type: 'InteractionComplete', success: false, error: 'HTTP 503' }),
      });
    }));

  it('a busy agent fails the interaction at once rather than queue it', () =>
    marbleTest((m) => {
      const runes = m.hot<Rune>('-r', { r: interaction() });
      m.expectObservable(chatTalk()(runes, withTurn(m, 'tool_executing'), undefined)).toBe('-c', {
        c: toActor({ type: 'InteractionComplete', success: false, error: "the chat's agent is busy (its turn is tool_executing)" }),
      });
    }));

  it("a steered turn goes on in the next turn: only that one's end completes the interaction", () =>
    marbleTest((m) => {
      const steered = turnRune(5, { type: 'steer', input: 'shorter' }, 'streaming', 'idle', 'turn.interrupted');
      const runes = m.hot<Rune>('-r-s-x--c', { r: interaction(), s: started, x: steered, c: { ...completed, seq: 8 } });
      m.expectObservable(chatTalk()(runes, withTurn(m, 'idle'), undefined)).toBe('-b------c', {
        b: startTurn(),
        c: toActor({ type: 'InteractionComplete', success: true }),
      });
    }));
});

describe('chatTalk: Cancel and Pause interrupt the turn', () => {
  it("Cancel while running interrupts the busy turn with the actor's reason; the actor has ended, so the turn's end completes nothing", () =>
    marbleTest((m) => {
      const cancel = actorRune(3, { type: 'Cancel', reason: 'user left' }, 'running', 'cancelled');
      const interrupted = turnRune(5, { type: 'interrupt', reason: 'user left' }, 'streaming', 'idle', 'turn.interrupted');
      const runes = m.hot<Rune>('-r-s-x-i', { r: interaction(), s: started, x: cancel, i: interrupted });
      m.expectObservable(chatTalk()(runes, withTurn(m, 'idle', runes), undefined)).toBe('-b---x--', {
        b: startTurn(),
        x: { stream: TURN, event: { type: 'interrupt', reason: 'user left' } },
      });
    }));

  it('Pause of a running actor interrupts a busy turn; an idle turn is left alone', () =>
    marbleTest((m) => {
      const pause = actorRune(3, { type: 'Pause', reason: 'later' }, 'running', 'paused');
      m.expectObservable(chatTalk()(m.hot<Rune>('--p', { p: pause }), withTurn(m, 'tool_executing'), undefined)).toBe('--x', {
        x: { stream: TURN, event: { type: 'interrupt', reason: 'later' } },
      });
      m.expectObservable(chatTalk()(m.hot<Rune>('--p', { p: pause }), withTurn(m, 'idle'), undefined)).toBe('---');
    }));

  it('a paused actor resumed by a ProcessInteraction with a message is given that message again, now from idle', () =>
    marbleTest((m) => {
      const resume = actorRune(4, { type: 'ProcessInteraction', userId: 'u1', message: 'go on' }, 'paused', 'idle');
      m.expectObservable(chatTalk()(m.hot<Rune>('-p', { p: resume }), withTurn(m, 'idle'), undefined)).toBe('-a', {
        a: toActor({ type: 'ProcessInteraction', userId: 'u1', message: 'go on' }),
      });
    }));
});
