import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VirtualTimeScheduler } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, reactAgentEpics, scriptedModel, type ProviderChain, type ScriptStep } from '../../../src/agents.js';
import {
  agentStreams,
  checkInvariants,
  createEngine,
  memoryStore,
  type AgentLifecycleState,
  type AgentState,
  type ConversationState,
  type Budget,
  type Engine,
  type PriceTable,
  type RuneStore,
} from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { watchEngine } from '../../support/watched-engine.js';
import { afterEmptyAnswer } from '../../support/empty-answer-chain.js';

/**
 * ReAct agents under seed 003's budgets (issue 28 (d)): their model calls count against their
 * conversation's budget as a turn-based agent's do, on an engine with both kinds of epics, in
 * virtual time.
 */

const agent = agentStreams('conv/c1', 'r1');
const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});
const dir = mkdtempSync(join(tmpdir(), 'runestream-react-budget-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const clock = defineTool({ name: 'clock', description: 'The time now.', inputSchema: z.object({}), execute: () => '12:00' });
const answer: ScriptStep = { text: 'An answer.', usage: { inputTokens: 10, outputTokens: 2 } };

/** `limit`: the conversation's `modelCalls`, or a budget with the price table it is counted by. */
function start(
  limit: number | { readonly budget: Budget; readonly prices: PriceTable },
  script: readonly ScriptStep[] = [answer],
  chain?: ProviderChain,
  scheduler = new VirtualTimeScheduler(),
  tools = [clock],
  store: RuneStore = memoryStore(),
) {
  const model = scriptedModel(script, { whenExhausted: 'cycle' });
  const { budget: conversationBudget, prices } = typeof limit === 'number' ? { budget: { modelCalls: limit }, prices: undefined } : limit;
  const engine = createEngine({
    store,
    scheduler,
    epics: [
      ...agentEpics({ model: chain ?? model, tools, conversationBudget, ...(prices === undefined ? {} : { prices }) }),
      ...reactAgentEpics({ model: chain ?? model, tools, breakers: false, budgets: { conversationBudget }, ...(prices === undefined ? {} : { prices }) }),
    ],
  });
  engines.push(engine);
  return { engine, store, model, ...watchEngine(engine, scheduler) };
}

describe('a ReAct agent under its conversation budget', () => {
  it('asked repeatedly with modelCalls 4: at most 4 answers, the conversation suspended with budget_exhausted', async () => {
    const { engine, store, model, errors, runes, until, state } = start(4);
    await engine.spawn(agent.react, 'react-agent');
    expect(await until(() => state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle')).toBe(true);

    for (let n = 1; n <= 6; n++) {
      await engine.dispatch(agent.react, { type: 'user-message-received', messageId: `m${n}`, content: `question ${n}`, timestamp: n * 1000 });
      // The loop comes to rest, and so does the agent.
      const rested = await until(() => state<AgentState>(agent.react)?.reActContext === null && state<AgentLifecycleState>(agent.lifecycle)?.value !== 'running_turn');
      expect(rested).toBe(true);
    }

    const answers = state<AgentState>(agent.react)!.messages.filter((m) => m.role === 'assistant' && m.content !== '');
    expect(answers).toHaveLength(4);
    expect(model.doStreamCalls).toHaveLength(4);
    const talk = state<ConversationState>(agent.root)!;
    expect(talk.value).toBe('suspended');
    expect(talk.budgetInfo).toMatchObject({ usage: { modelCalls: 4 } }); // its agents' usage (one agent here) as it was suspended
    const suspended = (await store.read(agent.root)).filter((rune) => rune.kind === 'session.suspended');
    expect(suspended.map((rune) => rune.event.type)).toEqual(['budget_exhausted']);
    expect(talk.reason).toBe('conversation budget exhausted: modelCalls 4 of 4');

    // The log in the order it was written: no turn started while the conversation was suspended.
    expect(checkInvariants(runes)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it("each model call reaches the agent and the conversation with its usage, as a turn-based agent's turn does", async () => {
    const { engine, store, until, state } = start(10);
    await engine.spawn(agent.react, 'react-agent');
    await until(() => state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle');
    await engine.dispatch(agent.react, { type: 'user-message-received', messageId: 'm1', content: 'hi', timestamp: 1000 });
    await until(() => state<AgentState>(agent.react)?.reActContext === null && state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle');

    const used = { inputTokens: 10, outputTokens: 2, modelCalls: 1, toolCalls: 0 };
    const ended = (await store.read(agent.lifecycle)).filter((rune) => rune.kind === 'turn.completed');
    expect(ended.map((rune) => rune.event)).toMatchObject([{ type: 'turn_completed', usage: used }]);
    expect(state<AgentLifecycleState>(agent.lifecycle)!.usage).toMatchObject(used);
    // The conversation's usage is its agents' (one here): the lifecycle's above.
  });

  it('a loop of many model calls (tool rounds) stops at the budget: its next call is refused, the loop ends saying why', async () => {
    const { engine, store, model, errors, runes, until, state } = start(2, [{ toolCalls: [{ toolName: 'clock', input: {} }] }]);
    await engine.spawn(agent.react, 'react-agent');
    await until(() => state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle');
    await engine.dispatch(agent.react, { type: 'user-message-received', messageId: 'm1', content: 'the time, again and again', timestamp: 1000 });
    expect(await until(() => state<AgentState>(agent.react)?.reActContext === null && state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle')).toBe(true);

    expect(model.doStreamCalls).toHaveLength(2);
    expect(state<ConversationState>(agent.root)).toMatchObject({ value: 'suspended', budgetInfo: { usage: { modelCalls: 2, toolCalls: 2 } } });
    const observed = (await store.read(agent.react)).filter((rune) => rune.kind === 're-act-observed');
    expect(observed.at(-1)?.event).toMatchObject({
      observation: { type: 'complete-re-act', reason: 'the conversation is suspended: conversation budget exhausted: modelCalls 2 of 2' },
    });
    // Both calls asked for tools only: no message of the history but the question.
    expect(state<AgentState>(agent.react)!.messages.map((m) => m.role)).toEqual(['user']);
    expect(checkInvariants(runes)).toEqual([]);
    expect(errors).toEqual([]);
  });
  it("a model call is refused once the conversation's budget is used up by another agent's running turn, before the suspension lands", async () => {
    // The turn-based root's turn answers once (asking for a tool that never answers) and waits:
    // its call counts for the conversation only while running, so the conversation is not suspended.
    const waits = defineTool({ name: 'waits', description: 'Never answers.', inputSchema: z.object({}), execute: () => new Promise<string>(() => {}) });
    const root = agentStreams('conv/c1', 'root');
    const { engine, model, errors, until, state } = start(2, [{ toolCalls: [{ toolName: 'waits', input: {} }] }, answer], undefined, undefined, [waits]);
    await engine.spawn(root.turn, 'turn-engine');
    await engine.dispatch(root.turn, { type: 'start_turn', input: 'wait' });
    expect(await until(() => state<{ value: string }>(root.turn)?.value === 'tool_executing')).toBe(true);

    // The ReAct agent's first call uses the budget up (2 of 2 with the root's running turn).
    await engine.spawn(agent.react, 'react-agent');
    await until(() => state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle');
    await engine.dispatch(agent.react, { type: 'user-message-received', messageId: 'm1', content: 'first', timestamp: 1000 });
    await until(() => state<AgentState>(agent.react)?.reActContext === null && state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle');
    expect(model.doStreamCalls).toHaveLength(2);

    // Its next call is refused: the conversation is still active, but its budget is used up.
    expect(state<ConversationState>(agent.root)?.value).toBe('active');
    await engine.dispatch(agent.react, { type: 'user-message-received', messageId: 'm2', content: 'second', timestamp: 2000 });
    await until(() => state<AgentState>(agent.react)?.reActContext === null && state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle');
    expect(model.doStreamCalls).toHaveLength(2);
    expect(errors).toEqual([]);
  });
});

describe('a ReAct model call of several rounds (internal tools answered inside it)', () => {
  it('each round is a model call under the budget: with modelCalls 1, the round after the first is not asked, the loop ends saying why', async () => {
    const internalRound: ScriptStep = { text: 'Looking.', toolCalls: [{ toolName: 'query_tool_calls', input: {} }], usage: { inputTokens: 7, outputTokens: 1 } };
    const { engine, store, model, errors, runes, until, state } = start(1, [internalRound, answer]);
    await engine.spawn(agent.react, 'react-agent');
    await until(() => state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle');
    await engine.dispatch(agent.react, { type: 'user-message-received', messageId: 'm1', content: 'hi', timestamp: 1000 });
    expect(await until(() => state<AgentState>(agent.react)?.reActContext === null && state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle')).toBe(true);

    expect(model.doStreamCalls).toHaveLength(1);
    const reactRunes = await store.read(agent.react);
    expect(reactRunes.map((rune) => rune.kind)).toEqual([
      'spawned',
      'user-message-received',
      'llm-message-started',
      'llm-round-answered',
      'llm-message-completed',
      're-act-observed',
    ]);
    expect(reactRunes.at(-1)?.event).toMatchObject({ observation: { type: 'complete-re-act', reason: 'conversation budget exhausted: modelCalls 1 of 1' } });
    // The message started in the first round keeps what it had.
    expect(state<AgentState>(agent.react)!.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'Looking.', streaming: false });
    expect(state<ConversationState>(agent.root)).toMatchObject({ value: 'suspended', budgetInfo: { usage: { modelCalls: 1 } } });
    expect(checkInvariants(runes)).toEqual([]);
    expect(errors).toEqual([]);
  });
});

describe("a ReAct agent's model call that fails after an empty answer", () => {
  it("counts the empty answer: the provider answered it, so its call and tokens reach the agent's and the conversation's usage", async () => {
    const chain = afterEmptyAnswer({ error: 'HTTP 503' });
    const { engine, until, state } = start(10, [answer], chain);
    await engine.spawn(agent.react, 'react-agent');
    await until(() => state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle');
    await engine.dispatch(agent.react, { type: 'user-message-received', messageId: 'm1', content: 'hi', timestamp: 1000 });
    await until(
      () =>
        state<AgentState>(agent.react)?.reActContext === null &&
        state<AgentLifecycleState>(agent.lifecycle)?.turnId !== undefined &&
        state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle',
    );
    expect(state<AgentLifecycleState>(agent.lifecycle)!.usage).toMatchObject({ inputTokens: 100, modelCalls: 1 });
    // The conversation's usage is its agents' (one here): the lifecycle's above.
  });
});

/** Budgets the first provider's empty answer (100 input tokens) uses up: its last model call, or its cost at 1 per million. */
const usedUpByEmptyAnswer = [
  ['modelCalls', 1, 'modelCalls 1 of 1'],
  ['cost', { budget: { cost: 0.0001 }, prices: { 'scripted-model': { inputPerMillion: 1, outputPerMillion: 0 } } }, 'cost 0.0001 of 0.0001'],
] as const;

describe("a ReAct agent's empty answer that uses the budget up", () => {
  // On SQLite the empty answer is not durable yet when the chain asks: it is counted (and priced) from the answer itself.
  it.each(usedUpByEmptyAnswer.flatMap((row) => (['memory', 'sqlite'] as const).map((kind) => [...row, kind] as const)))(
    "%s: the chain does not fall over (the next provider is another call), and the loop ends with the budget's reason (%s)",
    async (dimension, limit, used, kind) => {
      const second = scriptedModel([answer]);
      const chain: ProviderChain = { providers: [afterEmptyAnswer({}).providers[0]!, { name: 'second', model: second }] };
      const onDisk = kind === 'memory' ? memoryStore() : sqliteStore(join(dir, `fall-over-${dimension}.db`));
      const { engine, store, errors, runes, until, state } = start(limit, [answer], chain, undefined, undefined, onDisk);
      await engine.spawn(agent.react, 'react-agent');
      await until(() => state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle');
      await engine.dispatch(agent.react, { type: 'user-message-received', messageId: 'm1', content: 'hi', timestamp: 1000 });
      expect(await until(() => state<AgentState>(agent.react)?.reActContext === null && state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle')).toBe(true);

      expect(second.doStreamCalls).toHaveLength(0);
      const observed = (await store.read(agent.react)).filter((rune) => rune.kind === 're-act-observed');
      expect(observed.at(-1)?.event).toMatchObject({ observation: { type: 'complete-re-act', reason: `conversation budget exhausted: ${used}` } });
      // The empty answer was a call the first provider answered: it is counted, and it used the budget up.
      expect(state<AgentLifecycleState>(agent.lifecycle)).toMatchObject({ usage: { inputTokens: 100, modelCalls: 1 } }); // the conversation's: its one agent's
      expect(checkInvariants(runes)).toEqual([]);
      expect(errors).toEqual([]);
    },
  );
});

describe("a ReAct agent's model call after an empty answer, while the next provider still answers", () => {
  it('records the empty answer at once (llm-round-answered, emptyAnswer): its call counts in the running turn before the answer ends', async () => {
    const chain = afterEmptyAnswer({ text: 'An answer.', hang: true, afterDeltas: 1 });
    const { engine, until, state, runes } = start(10, [answer], chain);
    await engine.spawn(agent.react, 'react-agent');
    await until(() => state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle');
    await engine.dispatch(agent.react, { type: 'user-message-received', messageId: 'm1', content: 'hi', timestamp: 1000 });
    expect(await until(() => runes.some((rune) => rune.stream === agent.react && rune.kind === 'llm-message-started'))).toBe(true);
    const spent = runes.filter((rune) => rune.stream === agent.react && rune.kind === 'llm-round-answered');
    expect(spent.map((rune) => rune.event)).toMatchObject([{ emptyAnswer: true, usage: { inputTokens: 100, modelCalls: 1 } }]);
    // The call is still under way: the agent's turn runs, the empty answer already counted.
    expect(state<AgentLifecycleState>(agent.lifecycle)?.value).toBe('running_turn');
  });
});

describe('a ReAct model call cut by a restart after a round of internal tools was answered', () => {
  // The model answers a first round (an internal tool, answered inside the call) and hangs on the
  // second; the process dies there. The answered round was a call the provider answered.
  const internalRound: ScriptStep = { toolCalls: [{ toolName: 'query_tool_calls', input: {} }], usage: { inputTokens: 7, outputTokens: 1 } };
  const hangs: ScriptStep = { hang: true };

  /** The first process, on a store that outlives it: it dies with the call's second round under way. */
  async function diesMidCall(modelCalls: number) {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    const before = start(modelCalls, [internalRound, hangs], undefined, undefined, undefined, kept);
    await before.engine.spawn(agent.react, 'react-agent');
    await before.until(() => before.state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle');
    await before.engine.dispatch(agent.react, { type: 'user-message-received', messageId: 'm1', content: 'hi', timestamp: 1000 });
    expect(await before.until(() => before.model.doStreamCalls.length === 2)).toBe(true);
    await before.engine.close();
    expect(before.errors).toEqual([]);
    return kept;
  }

  it("the round the dead process had answered counts in the call's turn, for the agent and the conversation", async () => {
    const kept = await diesMidCall(10);
    const { model, errors, until, state } = start(10, [answer], undefined, undefined, undefined, kept);
    expect(await until(() => state<AgentState>(agent.react)?.reActContext === null && state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle')).toBe(true);

    expect(model.doStreamCalls).toHaveLength(1);
    // Two answered calls: the dead process's round and the answer made after the restart.
    const used = { inputTokens: 17, outputTokens: 3, modelCalls: 2 };
    expect(state<AgentLifecycleState>(agent.lifecycle)!.usage).toMatchObject(used);
    // The conversation's usage is its agents' (one here): the lifecycle's above.
    expect(errors).toEqual([]);
  });

  it('restarted with modelCalls 1, that round used the budget up: the call is not made again, the loop ends saying why', async () => {
    // The first process had room for the second round; the one after the restart has none left.
    const kept = await diesMidCall(10);
    const { model, errors, until, state } = start(1, [answer], undefined, undefined, undefined, kept);
    expect(await until(() => state<AgentState>(agent.react)?.reActContext === null && state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle')).toBe(true);

    expect(model.doStreamCalls).toHaveLength(0);
    const observed = (await kept.read(agent.react)).filter((rune) => rune.kind === 're-act-observed');
    expect(observed.map((rune) => rune.event)).toMatchObject([{ observation: { type: 'complete-re-act', reason: 'conversation budget exhausted: modelCalls 1 of 1' } }]);
    expect(state<ConversationState>(agent.root)).toMatchObject({ value: 'suspended', budgetInfo: { usage: { modelCalls: 1 } } });
    expect(errors).toEqual([]);
  });
});
