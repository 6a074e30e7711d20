import { describe, expect, it } from 'vitest';
import { agentStreams } from '../../../src/index.js';
import { agentTurns } from '../../../src/effects/agent/agent-turns.js';
import { machineWorld, playEpic } from '../../support/frames.js';

/**
 * `agentTurns` alone, step by step: a log in memory played by the real machines stands for the
 * store, and the test decides which of the epic's commands are durable before the next rune
 * comes, as a busy store would.
 */

const a = agentStreams('conv/c1', 'a1');

/** An agent in conversation c1, idle, its turn stream spawned. */
function idleAgent() {
  const w = machineWorld();
  w.spawn(a.root, 'conversation', { conversationId: 'c1' });
  w.dispatch(a.root, { type: 'agent_ready', rootAgentId: 'a1' });
  w.spawn(a.lifecycle, 'agent-lifecycle', { agentId: 'a1' });
  w.dispatch(a.lifecycle, { type: 'init_complete' });
  w.spawn(a.turn, 'turn-engine', { agentId: 'a1' });
  return w;
}

describe('agentTurns: a turn started before its agent has heard of the last one', () => {
  it("checks the agent's budget with the usage the last turn's ending carries, while the agent's hearing of it is not durable", async () => {
    const w = idleAgent();
    const play = playEpic(agentTurns({ budget: { outputTokens: 2 } }), w.context(), w.scheduler);
    const started = await play.send(w.dispatch(a.turn, { type: 'start_turn', input: 'hi' }));
    expect(started).toEqual([{ stream: a.lifecycle, event: { type: 'turn_assigned', turnId: '1' } }]);
    w.run(started);
    // The first turn ends, using the agent's whole budget; what the agent is told of it is not applied (not durable yet)...
    const told = await play.send(w.dispatch(a.turn, { type: 'response_done', usage: { outputTokens: 2 } }));
    expect(told).toContainEqual({ stream: a.lifecycle, event: { type: 'turn_completed', usage: expect.objectContaining({ outputTokens: 2 }) } });
    expect(w.value(a.lifecycle)).toBe('running_turn');
    // ... when the next turn starts (the turn is idle with its ending): it is refused on that usage.
    expect(await play.send(w.dispatch(a.turn, { type: 'start_turn', input: 'more' }))).toEqual([
      { stream: a.turn, event: { type: 'interrupt', reason: 'agent budget exhausted: outputTokens 2 of 2' } },
    ]);
  });

  it('counts nothing twice: once the agent has heard, the next turn is checked on its durable usage alone', async () => {
    const w = idleAgent();
    const play = playEpic(agentTurns({ budget: { outputTokens: 3 } }), w.context(), w.scheduler);
    w.run(await play.send(w.dispatch(a.turn, { type: 'start_turn', input: 'hi' })));
    w.run(await play.send(w.dispatch(a.turn, { type: 'response_done', usage: { outputTokens: 2 } })));
    expect(w.state<{ usage: { outputTokens: number } }>(a.lifecycle)?.usage.outputTokens).toBe(2);
    // 2 of 3 used: the next turn may start (counted twice, it would be refused).
    expect(await play.send(w.dispatch(a.turn, { type: 'start_turn', input: 'more' }))).toEqual([{ stream: a.lifecycle, event: { type: 'turn_assigned', turnId: '2' } }]);
  });
});

describe("agentTurns: the conversation hears of a turn's end only when it changes its errors in a row", () => {
  it('an error counts one more; a completed turn after it clears them, even before the error is durable; a completed turn with none, and an interrupted one, tell it nothing', async () => {
    const w = idleAgent();
    const play = playEpic(agentTurns(), w.context(), w.scheduler);
    const turn = async (end: Record<string, unknown>, apply = true) => {
      w.run(await play.send(w.dispatch(a.turn, { type: 'start_turn', input: 'go' })));
      const told = await play.send(w.dispatch(a.turn, end as never));
      if (apply) w.run(told);
      return told.filter((command) => command.stream === a.root);
    };
    expect(await turn({ type: 'response_done' })).toEqual([]);
    expect(await turn({ type: 'interrupt', reason: 'user' })).toEqual([]);
    // The error's telling is not applied (not durable yet) when the next turn completes: it clears the count all the same.
    expect(await turn({ type: 'stream_error', error: 'HTTP 503' }, false)).toEqual([{ stream: a.root, event: { type: 'turn_completed', outcome: 'error' } }]);
    w.dispatch(a.lifecycle, { type: 'turn_error', error: 'HTTP 503' }); // the agent heard it, in the store's order
    expect(await turn({ type: 'response_done' })).toEqual([{ stream: a.root, event: { type: 'turn_completed', outcome: 'completed' } }]);
    expect(await turn({ type: 'response_done' })).toEqual([]);
    // Durable errors in a row: the next completed turn clears them.
    w.dispatch(a.root, { type: 'turn_completed', outcome: 'error' });
    expect(await turn({ type: 'response_done' })).toEqual([{ stream: a.root, event: { type: 'turn_completed', outcome: 'completed' } }]);
  });
});
