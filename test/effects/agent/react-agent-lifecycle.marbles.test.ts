import { describe, expect, it } from 'vitest';
import { agentStreams, type AgentInput, type AgentLifecycleState, type ConversationState, type EpicCommand, type Usage } from '../../../src/index.js';
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
const done = (calledLlmAt: number, timestamp: number, used?: Usage): AgentInput => ({
  type: 're-act-observed',
  calledLlmAt,
  observation: { type: 'complete-re-act' },
  ...(used === undefined ? {} : { usage: used }),
  timestamp,
});
/** What `modelCalls` answered rounds used, 10 tokens in and 1 out each. */
const usage = (modelCalls: number): Usage => ({ inputTokens: 10 * modelCalls, outputTokens: modelCalls, modelCalls, toolCalls: 0, wallClockMs: 0 });
const answered = (messageId: string, timestamp: number): AgentInput => ({ type: 'llm-message-completed', messageId, content: 'hello', timestamp });
/** A turn's end, heard by the agent (the conversation's usage is its agents'; it is told only of a change to its errors in a row). */
const turnCompleted = (used: Usage): EpicCommand[] => [{ stream: a1.lifecycle, event: { type: 'turn_completed', usage: used } }];

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

  it('each model call is a turn: turn_assigned once while it runs (the conversation is sent no new_turn); its observation completes it with its usage; the tools run between turns', async () => {
    const { w, play } = await readyAgent();
    const asked = w.dispatch(a1.react, ask('u1', 1));
    const started = await play.send(asked);
    expect(started).toEqual([{ stream: a1.lifecycle, event: { type: 'turn_assigned', turnId: `react-${asked.seq}` } }]);
    // More runes of the same call, before and after the assignment lands: no second turn.
    expect(await play.send(w.dispatch(a1.react, answering('m1', 2)))).toEqual([]);
    expect(await applyAll(play, w, started)).toEqual([]);
    expect(w.value(a1.lifecycle)).toBe('running_turn');
    expect(await play.send(w.dispatch(a1.react, answered('m1', 3)))).toEqual([]);

    // The call's observation ends the turn with what the call used (every rune of these frames is
    // at 0: no wall clock); its tool runs with the agent idle.
    const observed = await play.send(
      w.dispatch(a1.react, {
        type: 're-act-observed',
        calledLlmAt: 1,
        observation: { type: 'continue-re-act', toolCalls: { t1: { name: 'clock', parameters: '{}', calledAt: 4 } } },
        usage: usage(1),
        timestamp: 4,
      }),
    );
    expect(observed).toEqual(turnCompleted(usage(1)));
    await applyAll(play, w, observed);
    expect(w.value(a1.lifecycle)).toBe('idle');

    // Its result makes the next call due: the next turn.
    const result = w.dispatch(a1.react, { type: 'tool-call-completed', toolCallId: 't1', result: { isSuccess: true, content: '12:00', receivedAt: 5 }, timestamp: 5 });
    const next = await play.send(result);
    expect(next).toEqual([{ stream: a1.lifecycle, event: { type: 'turn_assigned', turnId: `react-${result.seq}` } }]);
    await applyAll(play, w, next);

    // That call comes to rest: its turn completes; another rune at rest before it lands asks nothing.
    expect(await play.send(w.dispatch(a1.react, answering('m2', 6)))).toEqual([]);
    expect(await play.send(w.dispatch(a1.react, answered('m2', 7)))).toEqual([]);
    const rest = await play.send(w.dispatch(a1.react, done(5, 8, usage(2))));
    expect(rest).toEqual(turnCompleted(usage(2)));
    await applyAll(play, w, rest);
    expect(w.value(a1.lifecycle)).toBe('idle');
    expect(w.state<ConversationState>(ROOT)?.turns).toBeUndefined();
    expect(w.state<AgentLifecycleState>(a1.lifecycle)?.usage).toMatchObject({ modelCalls: 3, inputTokens: 30 }); // the conversation's too: its agents'
  });

  it('no turn starts while the conversation is suspended for budget', async () => {
    const { w, play } = await readyAgent();
    w.dispatch(ROOT, { type: 'budget_exhausted', reason: 'conversation budget exhausted: modelCalls 4 of 4' });
    expect(await play.send(w.dispatch(a1.react, ask('u1', 1)))).toEqual([]);
    expect(w.value(a1.lifecycle)).toBe('idle');
  });

  it('a terminated agent (its conversation closed) runs no turn', async () => {
    const { w, play } = await readyAgent();
    w.dispatch(a1.lifecycle, { type: 'parent_closed', stats: { turns: 0, toolCalls: 0 } });
    expect(await play.send(w.dispatch(a1.react, ask('u1', 1)))).toEqual([]);
  });
});
