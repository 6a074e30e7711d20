import { describe, expect, it } from 'vitest';
import { NO_USAGE, agentStreams, type Usage } from '../../../src/index.js';
import { agentBudgets, type BudgetLimits } from '../../../src/effects/agent/agent-budgets.js';
import { applyAll, machineWorld, playEpic } from '../../support/frames.js';

/**
 * `agentBudgets` alone, in virtual time, for the dimensions other than wall clock (tokens, model
 * calls, tool calls; wall clock has its own virtual-time tests in agent-budgets.test.ts): a log in
 * memory played by the real machines (`machineWorld`), the test sending the runes `agentTurns`
 * and `agentModel` would cause and applying what the epic emits.
 */

const ROOT = 'conv/c1';
const a1 = agentStreams(ROOT, 'a1');
const a2 = agentStreams(ROOT, 'a2');
const used = (usage: Partial<Usage>): Usage => ({ ...NO_USAGE, ...usage });

/** A conversation with idle agents a1 and a2, each with an idle turn stream; a1 has run one turn that used `before`. */
function conversation(limits: BudgetLimits, before: Partial<Usage> = {}) {
  const w = machineWorld();
  w.spawn(ROOT, 'conversation', { conversationId: 'c1' });
  w.dispatch(ROOT, { type: 'agent_ready', rootAgentId: 'a1' });
  for (const agent of [a1, a2]) {
    w.spawn(agent.lifecycle, 'agent-lifecycle', { agentId: agent.agentId });
    w.dispatch(agent.lifecycle, { type: 'init_complete' });
    w.spawn(agent.turn, 'turn-engine', { agentId: agent.agentId });
  }
  w.dispatch(a1.lifecycle, { type: 'turn_assigned', turnId: '1' });
  w.dispatch(a1.lifecycle, { type: 'turn_completed', usage: used(before) });
  const play = playEpic(agentBudgets(limits), w.context(), w.scheduler);
  return { w, play };
}

/** A turn of `agent` that starts and gets a response asking for `calls` tools, having used `usage`: the rune that enters tool_executing. */
function toolRound(w: ReturnType<typeof machineWorld>, agent: typeof a1, calls: number, usage: { inputTokens?: number; outputTokens?: number } = {}) {
  w.dispatch(agent.turn, { type: 'start_turn', input: 'go' });
  const callIds = Array.from({ length: calls }, (_, i) => `c${i + 1}`);
  return w.dispatch(agent.turn, { type: 'tool_calls_received', callIds, calls: callIds.map((callId) => ({ callId, toolName: 'clock', arguments: {} })), usage });
}

describe('agentBudgets in virtual time: an idle agent over its limit is terminated', () => {
  it('output tokens reached as a turn ends: budget_exhausted naming the dimension, used and limit; the agent ends terminated', async () => {
    const { w, play } = conversation({ budget: { outputTokens: 100 } }, { outputTokens: 60 });
    w.dispatch(a1.lifecycle, { type: 'turn_assigned', turnId: '2' });
    const exhausted = await play.send(w.dispatch(a1.lifecycle, { type: 'turn_completed', usage: used({ outputTokens: 40 }) }));
    expect(exhausted).toEqual([{ stream: a1.lifecycle, event: { type: 'budget_exhausted', reason: 'agent budget exhausted: outputTokens 100 of 100' } }]);
    await applyAll(play, w, exhausted);
    expect(w.value(a1.lifecycle)).toBe('terminated');
  });

  it('under every limit, and another agent, are left alone', async () => {
    const { w, play } = conversation({ budget: { outputTokens: 100, modelCalls: 5 } }, { outputTokens: 60, modelCalls: 4 });
    w.dispatch(a2.lifecycle, { type: 'turn_assigned', turnId: '1' });
    expect(await play.send(w.dispatch(a2.lifecycle, { type: 'turn_completed', usage: used({ outputTokens: 99, modelCalls: 4 }) }))).toEqual([]);
    expect(play.frames).toEqual([]);
  });
});

describe('agentBudgets in virtual time: a turn crossing a line stops at its next safe boundary', () => {
  it('a tool round that would take tool calls past the limit interrupts the turn, naming it; one that uses them up does not', async () => {
    const { w, play } = conversation({ budget: { toolCalls: 3 } }, { toolCalls: 1 });
    expect(await play.send(toolRound(w, a2, 3))).toEqual([]); // a2 has used none: 3 of 3 is allowed
    expect(await play.send(toolRound(w, a1, 3))).toEqual([{ stream: a1.turn, event: { type: 'interrupt', reason: 'agent budget exhausted: toolCalls 4 of 3' } }]);
  });

  it('a response that used up the input tokens: no further model call could be made, so the turn stops before its round', async () => {
    const { w, play } = conversation({ budget: { inputTokens: 1000 } }, { inputTokens: 400 });
    expect(await play.send(toolRound(w, a1, 1, { inputTokens: 600 }))).toEqual([
      { stream: a1.turn, event: { type: 'interrupt', reason: 'agent budget exhausted: inputTokens 1000 of 1000' } },
    ]);
  });
});

/** A turn of `agent` that ends having used `usage`, as its agent hears it: the lifecycle's rune (the conversation's usage is its agents'). */
function turnEnded(w: ReturnType<typeof machineWorld>, agent: typeof a1, usage: Partial<Usage>) {
  w.dispatch(agent.lifecycle, { type: 'turn_assigned', turnId: 't' });
  return w.dispatch(agent.lifecycle, { type: 'turn_completed', usage: used(usage) });
}

describe('agentBudgets in virtual time: a conversation over its limit is suspended', () => {
  it("model calls reached (its agents' summed): budget_exhausted with the budget report; a turn of another agent entering its round then stops", async () => {
    const { w, play } = conversation({ conversationBudget: { modelCalls: 3 } });
    expect(await play.send(turnEnded(w, a1, { modelCalls: 2 }))).toEqual([]);
    const suspended = await play.send(turnEnded(w, a2, { modelCalls: 1 }));
    expect(suspended).toEqual([
      {
        stream: ROOT,
        event: {
          type: 'budget_exhausted',
          reason: 'conversation budget exhausted: modelCalls 3 of 3',
          budgetInfo: { dimension: 'modelCalls', used: 3, limit: 3, usage: used({ modelCalls: 3 }), budget: { modelCalls: 3 } },
        },
      },
    ]);
    await applyAll(play, w, suspended);
    expect(w.value(ROOT)).toBe('suspended');
    expect(await play.send(toolRound(w, a2, 1))).toEqual([
      { stream: a2.turn, event: { type: 'interrupt', reason: 'the conversation is suspended: conversation budget exhausted: modelCalls 3 of 3' } },
    ]);
  });

  it('budget_replenished with a higher budget: active again and not suspended again', async () => {
    const { w, play } = conversation({ conversationBudget: { modelCalls: 1 } });
    await applyAll(play, w, await play.send(turnEnded(w, a1, { modelCalls: 1 })));
    expect(w.value(ROOT)).toBe('suspended');
    expect(await play.send(w.dispatch(ROOT, { type: 'budget_replenished', budget: { modelCalls: 10 } }))).toEqual([]);
    expect(w.value(ROOT)).toBe('active');
  });
});
