import { describe, expect, it } from 'vitest';
import { agentStreams, type AgentInput, type EpicCommand } from '../../../src/index.js';
import { reactAgentLifecycle } from '../../../src/effects/agent/react-agent-lifecycle.js';
import { applyAll, machineWorld, playEpic } from '../../support/frames.js';

/**
 * The `reactAgentLifecycle` epic alone, in virtual time, on a log in memory played by the real
 * machines (`machineWorld`): the test sends a ReAct agent's runes as its loop runs and applies
 * what the epic emits. Its steps await the agent's states, so each frame is a rune sent and the
 * commands it led to once they settled.
 */

const ROOT = 'conv/c1';
const a1 = agentStreams(ROOT, 'a1');

const ask = (messageId: string, timestamp: number): AgentInput => ({ type: 'user-message-received', messageId, content: 'hi', timestamp });
const answering = (messageId: string, timestamp: number): AgentInput => ({ type: 'llm-message-started', messageId, timestamp });
const done = (calledLlmAt: number, timestamp: number): AgentInput => ({ type: 're-act-observed', calledLlmAt, observation: { type: 'complete-re-act' }, timestamp });
const turnCompleted: EpicCommand[] = [
  { stream: a1.lifecycle, event: { type: 'turn_completed' } },
  { stream: ROOT, event: { type: 'turn_completed' } },
];

/** A ReAct agent whose spawn has been heard and its companions applied: idle, in its conversation. */
async function readyAgent() {
  const w = machineWorld();
  const play = playEpic(reactAgentLifecycle(), w.context(), w.scheduler);
  await applyAll(play, w, await play.send(w.spawn(a1.react, 'react-agent')));
  return { w, play };
}

describe('reactAgentLifecycle: a ReAct agent gets the companions of a turn-based one', () => {
  it('its spawn: the conversation (with it as root agent) and its lifecycle, ready at once', async () => {
    const w = machineWorld();
    const play = playEpic(reactAgentLifecycle(), w.context(), w.scheduler);
    const companions = await play.send(w.spawn(a1.react, 'react-agent'));
    expect(companions).toEqual([
      { stream: ROOT, spawn: 'conversation', input: { conversationId: 'c1' } },
      { stream: a1.lifecycle, spawn: 'agent-lifecycle', input: { agentId: 'a1' } },
      { stream: a1.lifecycle, event: { type: 'init_complete' } },
      { stream: ROOT, event: { type: 'agent_ready', rootAgentId: 'a1' } },
    ]);
    await applyAll(play, w, companions);
    expect([w.value(ROOT), w.value(a1.lifecycle)]).toEqual(['active', 'idle']);

    // A second agent in the same conversation gets its lifecycle only.
    const a2 = agentStreams(ROOT, 'a2');
    expect(await play.send(w.spawn(a2.react, 'react-agent'))).toEqual([
      { stream: a2.lifecycle, spawn: 'agent-lifecycle', input: { agentId: 'a2' } },
      { stream: a2.lifecycle, event: { type: 'init_complete' } },
    ]);
  });

  it('a loop starting is a turn: turn_assigned and new_turn, once while it runs; at rest, turn_completed once, even with several runes', async () => {
    const { w, play } = await readyAgent();
    const asked = w.dispatch(a1.react, ask('u1', 1));
    const started = await play.send(asked);
    expect(started).toEqual([
      { stream: ROOT, event: { type: 'new_turn' } },
      { stream: a1.lifecycle, event: { type: 'turn_assigned', turnId: `react-${asked.seq}` } },
    ]);
    // More runes of the same loop, before and after the assignment lands: no second turn.
    expect(await play.send(w.dispatch(a1.react, answering('m1', 2)))).toEqual([]);
    expect(await applyAll(play, w, started)).toEqual([]);
    expect(w.value(a1.lifecycle)).toBe('running_turn');
    expect(await play.send(w.dispatch(a1.react, ask('u2', 3)))).toEqual([]); // joins the loop in progress

    // The loop comes to rest: the turn completes; another rune at rest before it lands asks nothing.
    const rest = await play.send(w.dispatch(a1.react, done(4, 4)));
    expect(rest).toEqual(turnCompleted);
    expect(await play.send(w.dispatch(a1.react, answering('m2', 5)))).toEqual([]);
    await applyAll(play, w, rest);
    expect(w.value(a1.lifecycle)).toBe('idle');
    expect(w.state<{ turns: number }>(ROOT)?.turns).toBe(1);

    // The next loop is the next turn.
    const next = w.dispatch(a1.react, ask('u3', 6));
    expect(await play.send(next)).toEqual([
      { stream: ROOT, event: { type: 'new_turn' } },
      { stream: a1.lifecycle, event: { type: 'turn_assigned', turnId: `react-${next.seq}` } },
    ]);
  });

  it('a terminated agent (its conversation closed) runs no turn', async () => {
    const { w, play } = await readyAgent();
    w.dispatch(a1.lifecycle, { type: 'parent_closed', stats: { turns: 0, toolCalls: 0 } });
    expect(await play.send(w.dispatch(a1.react, ask('u1', 1)))).toEqual([]);
  });
});
