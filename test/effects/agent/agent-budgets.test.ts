import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VirtualTimeScheduler, filter, firstValueFrom } from 'rxjs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, scriptedModel, type AgentEpicsOptions, type ScriptStep } from '../../../src/agents.js';
import {
  agentStreams,
  checkInvariants,
  createEngine,
  memoryStore,
  type AgentLifecycleState,
  type Budget,
  type ConversationState,
  type Engine,
  type EngineError,
  type Rune,
  type RuneStore,
  type TurnEngineState,
} from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite.js';
import { agentBudgets } from '../../../src/effects/agent/agent-budgets.js';
import { storeLog } from '../../support/store-log.js';
import { afterEmptyAnswer } from '../../support/empty-answer-chain.js';

const dir = mkdtempSync(join(tmpdir(), 'runestream-budgets-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const a = agentStreams('conv/c1', 'a1');
const clock = defineTool({ name: 'clock', description: 'The time now.', inputSchema: z.object({}), execute: () => '12:00' });
/** A tool that runs until it is aborted: a turn waits in its tool round. */
const wait = defineTool({
  name: 'wait',
  description: 'Waits.',
  inputSchema: z.object({}),
  rerunSafe: true,
  timeoutMs: Infinity,
  execute: (_input, { signal }) => new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
});

/**
 * One turn: a response that asks for the clock (100 tokens in, 10 out), then the answer (150 in,
 * 5 out). With {@link prices}, each response costs 0.2.
 */
const toolThenAnswer: ScriptStep[] = [
  { toolCalls: [{ toolName: 'clock', input: {} }], usage: { inputTokens: 100, outputTokens: 10 } },
  { text: 'It is noon.', usage: { inputTokens: 150, outputTokens: 5 } },
];
const prices = { 'scripted-model': { inputPerMillion: 1000, outputPerMillion: 10_000 } };
/** The same usage, the first response asking for a tool that runs until it is cancelled. */
const waitThenAnswer: ScriptStep[] = [
  {
    ...toolThenAnswer[0]!,
    toolCalls: [
      { toolName: 'wait', input: {} },
      { toolName: 'wait', input: {} },
    ],
  },
  toolThenAnswer[1]!,
];

const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

function start(options: Partial<AgentEpicsOptions> & { script: readonly ScriptStep[] }, store: RuneStore = memoryStore(), scheduler?: VirtualTimeScheduler) {
  const { script, ...rest } = options;
  const model = scriptedModel(script);
  const engine = createEngine({ store, ...(scheduler === undefined ? {} : { scheduler }), epics: agentEpics({ model, tools: [clock, wait], prices, ...rest }) });
  engines.push(engine);
  const errors: EngineError[] = [];
  engine.errors$.subscribe((error) => errors.push(error));
  return { engine, model, errors };
}

const turnsDone = (engine: Engine, turns: number) => firstValueFrom(engine.state$<TurnEngineState>(a.turn).pipe(filter((s) => s.value === 'idle' && s.turn === turns)));
const runeWhere = (engine: Engine, stream: string, matches: (rune: Rune) => boolean): Promise<Rune> => firstValueFrom(engine.runes$(stream).pipe(filter(matches)));
const stateOf = async <S>(engine: Engine, stream: string): Promise<S> => (await engine.snapshot<S>(stream))!.state;

/** Spawns the agent: its turn stream, then its lifecycle and conversation are ready. */
async function spawnAgent(engine: Engine): Promise<void> {
  await engine.spawn(a.turn, 'turn-engine');
  await runeWhere(engine, a.lifecycle, (r) => r.kind === 'agent.ready');
  await runeWhere(engine, a.root, (r) => r.to === 'active');
}

/** Spawns the agent (for its first turn) and runs a turn to its end, the agent's lifecycle too. */
async function runTurn(engine: Engine, input: string, turn = 1): Promise<TurnEngineState> {
  if (turn === 1) await spawnAgent(engine);
  await engine.dispatch(a.turn, { type: 'start_turn', input });
  const done = await turnsDone(engine, turn);
  // The lifecycle hears of the turn's end on its own stream: it may land after the turn is idle.
  await firstValueFrom(engine.state$<AgentLifecycleState>(a.lifecycle).pipe(filter((s) => s.value !== 'running_turn')));
  return done;
}

/** The reason of the turn's last interruption, from its log. */
const lastInterruption = async (store: RuneStore): Promise<string | undefined> => {
  const runes = (await store.read(a.turn)).filter((r) => r.kind === 'turn.interrupted');
  return (runes.at(-1)?.event as { reason?: string } | undefined)?.reason;
};

describe('agent budgets: usage in the runes', () => {
  it("each response carries its usage, model and cost; the turn sums them; the agent and the conversation add up each turn's", async () => {
    const store = memoryStore();
    const { engine, errors } = start({ script: [...toolThenAnswer, ...toolThenAnswer] }, store);
    await runTurn(engine, 'time?');
    const turn = await runTurn(engine, 'again?', 2);

    const responses = (await store.read(a.turn)).filter((r) => r.kind === 'turn.tool_calls_received' || r.kind === 'turn.completed');
    expect(responses.slice(0, 2).map((r) => r.event)).toMatchObject([
      { type: 'tool_calls_received', usage: { inputTokens: 100, outputTokens: 10 }, model: 'scripted-model', cost: 0.2 },
      { type: 'response_done', usage: { inputTokens: 150, outputTokens: 5 }, model: 'scripted-model', cost: 0.2 },
    ]);
    const perTurn = { inputTokens: 250, outputTokens: 15, modelCalls: 2, toolCalls: 1, cost: 0.4 };
    // Its wall clock, measured on the engine's (real) clock: asserted under virtual time in turn-seams.test.ts.
    expect(turn.turnUsage).toEqual({ ...perTurn, wallClockMs: expect.any(Number) });
    const ended = (await store.read(a.lifecycle)).filter((r) => r.kind === 'turn.completed');
    expect(ended.map((r) => r.event)).toMatchObject([
      { type: 'turn_completed', usage: perTurn },
      { type: 'turn_completed', usage: perTurn },
    ]);
    const totals = { inputTokens: 500, outputTokens: 30, modelCalls: 4, toolCalls: 2, cost: 0.8 };
    // The agent's usage, and so its conversation's (its agents' summed: one here).
    const agent = await firstValueFrom(engine.state$<AgentLifecycleState>(a.lifecycle).pipe(filter((s) => s.usage.modelCalls === 4)));
    expect(agent.usage).toMatchObject(totals);
    expect(errors).toEqual([]);
  });
});

describe('agent budgets: an empty answer the chain falls over from', () => {
  it("is a model call the provider answered: its usage and its call count in the turn's, the agent's and the conversation's", async () => {
    const store = memoryStore();
    const model = afterEmptyAnswer({ text: 'It is noon.', usage: { inputTokens: 150, outputTokens: 5 } });
    const engine = createEngine({ store, epics: agentEpics({ model, tools: [clock] }) });
    engines.push(engine);
    const errors: EngineError[] = [];
    engine.errors$.subscribe((error) => errors.push(error));
    const turn = await runTurn(engine, 'time?');
    expect(turn).toMatchObject({ output: 'It is noon.', turnUsage: { inputTokens: 250, outputTokens: 5, modelCalls: 2 } });
    // The agent's usage, and so its conversation's (its agents' summed: one here).
    const agent = await firstValueFrom(engine.state$<AgentLifecycleState>(a.lifecycle).pipe(filter((s) => s.usage.modelCalls > 0)));
    expect(agent.usage).toMatchObject({ inputTokens: 250, outputTokens: 5, modelCalls: 2 });
    expect(errors).toEqual([]);
  });
});

describe('agent budgets: an empty answer while the next provider still answers', () => {
  it("counts at once: the turn's usage holds the empty answer's call and tokens before the answer after it ends", async () => {
    const model = afterEmptyAnswer({ text: 'It is noon.', hang: true, afterDeltas: 1 });
    const engine = createEngine({ store: memoryStore(), epics: agentEpics({ model, tools: [clock] }) });
    engines.push(engine);
    await spawnAgent(engine);
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'time?' });
    // The second provider has streamed its first word and hangs: its answer has not ended.
    const streaming = await firstValueFrom(engine.state$<TurnEngineState>(a.turn).pipe(filter((s) => s.output === 'It')));
    expect(streaming).toMatchObject({ value: 'streaming', turnUsage: { inputTokens: 100, modelCalls: 1 } });
    const spent = await runeWhere(engine, a.turn, (rune) => rune.kind === 'turn.model_call_spent');
    expect(spent.payload).toMatchObject({ usage: { inputTokens: 100, outputTokens: 0 } });
  });
});

describe('agent budgets: an empty answer, then every other provider fails', () => {
  it("the turn ends in error, with the empty answer's call and tokens in its usage and the conversation's", async () => {
    const model = afterEmptyAnswer({ error: 'HTTP 503' });
    const engine = createEngine({ store: memoryStore(), epics: agentEpics({ model, tools: [clock] }) });
    engines.push(engine);
    const turn = await runTurn(engine, 'time?');
    expect(turn).toMatchObject({ error: expect.stringContaining('all providers failed'), turnUsage: { inputTokens: 100, modelCalls: 1 } });
    await firstValueFrom(engine.state$<ConversationState>(a.root).pipe(filter((s) => (s.consecutiveErrors ?? 0) > 0)));
    // The conversation's usage is its agents' (one here).
    expect((await firstValueFrom(engine.state$<AgentLifecycleState>(a.lifecycle).pipe(filter((s) => s.value === 'idle')))).usage).toMatchObject({
      inputTokens: 100,
      modelCalls: 1,
    });
  });
});

describe('agent budgets: an empty answer, then the next answer breaks off', () => {
  it("the turn ends in error, with the empty answer's call and tokens in its usage and the conversation's", async () => {
    const model = afterEmptyAnswer({ text: 'It is noon.', error: 'connection reset by the provider', afterDeltas: 1 });
    const engine = createEngine({ store: memoryStore(), epics: agentEpics({ model, tools: [clock] }) });
    engines.push(engine);
    const turn = await runTurn(engine, 'time?');
    // No fallback in the middle of an answer: the second provider's error fails the call.
    expect(turn).toMatchObject({ output: 'It', error: expect.stringContaining('connection reset'), turnUsage: { inputTokens: 100, modelCalls: 1 } });
    await firstValueFrom(engine.state$<ConversationState>(a.root).pipe(filter((s) => (s.consecutiveErrors ?? 0) > 0)));
    // The conversation's usage is its agents' (one here).
    expect((await firstValueFrom(engine.state$<AgentLifecycleState>(a.lifecycle).pipe(filter((s) => s.value === 'idle')))).usage).toMatchObject({
      inputTokens: 100,
      modelCalls: 1,
    });
  });
});

describe('agent budgets: an empty answer that uses the last model call up', () => {
  it.each(['memory', 'sqlite'])("the chain does not fall over: the next provider is another call, and the turn is interrupted with the budget's reason (%s)", async (kind) => {
    const second = scriptedModel([{ text: 'It is noon.' }]);
    const model = { providers: [afterEmptyAnswer({}).providers[0]!, { name: 'second', model: second }] };
    const store = kind === 'memory' ? memoryStore() : sqliteStore(join(dir, 'fall-over.db'));
    const engine = createEngine({ store, epics: agentEpics({ model, tools: [clock], conversationBudget: { modelCalls: 1 } }) });
    engines.push(engine);
    const turn = await runTurn(engine, 'time?');
    expect(second.doStreamCalls).toHaveLength(0);
    expect(turn).toMatchObject({ value: 'idle', turnUsage: { inputTokens: 100, modelCalls: 1 } });
    expect(await lastInterruption(store)).toBe('conversation budget exhausted: modelCalls 1 of 1');
  });
});

describe('agent budgets: an empty answer whose cost uses the budget up', () => {
  // 100 input tokens at 1 per million: 0.0001, the whole budget. On SQLite the empty answer is not
  // durable when the chain asks, so its cost must be counted from the answer itself.
  it.each(['memory', 'sqlite'])('the chain does not fall over, priced as its rune will be (%s)', async (kind) => {
    const second = scriptedModel([{ text: 'It is noon.' }]);
    const model = { providers: [afterEmptyAnswer({}).providers[0]!, { name: 'second', model: second }] };
    const store = kind === 'memory' ? memoryStore() : sqliteStore(join(dir, 'fall-over-cost.db'));
    const prices = { 'scripted-model': { inputPerMillion: 1, outputPerMillion: 0 } };
    const engine = createEngine({ store, epics: agentEpics({ model, tools: [clock], prices, conversationBudget: { cost: 0.0001 } }) });
    engines.push(engine);
    const turn = await runTurn(engine, 'time?');
    expect(second.doStreamCalls).toHaveLength(0);
    expect(turn).toMatchObject({ value: 'idle', turnUsage: { inputTokens: 100, modelCalls: 1, cost: 0.0001 } });
    expect(await lastInterruption(store)).toBe('conversation budget exhausted: cost 0.0001 of 0.0001');
  });
});

/** Each dimension, with a limit the first response of {@link waitThenAnswer} (100 in, 10 out, one model call, two tool calls, 0.2) reaches. */
const crossedByFirstResponse: Array<[keyof Budget, Budget, string]> = [
  ['inputTokens', { inputTokens: 100 }, 'inputTokens 100 of 100'],
  ['outputTokens', { outputTokens: 10 }, 'outputTokens 10 of 10'],
  ['modelCalls', { modelCalls: 1 }, 'modelCalls 1 of 1'],
  // A tool round may use the tool-call limit up, not go past it.
  ['toolCalls', { toolCalls: 1 }, 'toolCalls 2 of 1'],
  ['cost', { cost: 0.2 }, 'cost 0.2 of 0.2'],
];

describe('agent budgets: options', () => {
  it('refuses a budget that is not one, naming the option and the field', () => {
    const model = scriptedModel([]);
    expect(() => agentEpics({ model, budget: { toolCalls: -1 } })).toThrow(/^agentBudgets: "budget" is not a budget: .*toolCalls/);
    expect(() => agentEpics({ model, conversationBudget: { tokens: 5 } as Budget })).toThrow(/^agentBudgets: "conversationBudget" is not a budget: .*tokens/);
    expect(() => agentBudgets({ budgetsByRole: { scout: { cost: -1 } } })).toThrow(/^agentBudgets: "budgetsByRole.scout" is not a budget: .*cost/);
  });
});

describe('agent budgets: per agent', () => {
  it.each(crossedByFirstResponse)(
    '%s: the turn that crosses it is interrupted after that response, the agent terminated, and a later turn refused',
    async (_, budget, used) => {
      const store = memoryStore();
      const { engine, model, errors } = start({ script: waitThenAnswer, budget }, store);
      const terminated = runeWhere(engine, a.lifecycle, (r) => r.kind === 'agent.terminated');
      const cancelled = runeWhere(engine, a.call('call_1_0'), (r) => r.kind === 'tool.result');
      const alsoCancelled = runeWhere(engine, a.call('call_1_1'), (r) => r.kind === 'tool.result');
      const turn = await runTurn(engine, 'time?');

      // Interrupted at the boundary: the tool round is cancelled, the model not called again.
      expect(turn.reason).toBe(`agent budget exhausted: ${used}`);
      expect(model.doStreamCalls).toHaveLength(1);
      expect(await cancelled).toMatchObject({ to: 'cancelled_result', event: { reason: `agent budget exhausted: ${used}` } });
      expect((await terminated).event).toEqual({ type: 'budget_exhausted', reason: `agent budget exhausted: ${used}` });
      const agent = await stateOf<AgentLifecycleState>(engine, a.lifecycle);
      expect(agent).toMatchObject({ value: 'terminated', terminatedBy: 'budget_exhausted', usage: { modelCalls: 1, inputTokens: 100 } });

      // Over budget: a new turn is answered with an interruption that says why, and runs nothing.
      await runTurn(engine, 'and now?', 2);
      expect(await lastInterruption(store)).toBe(`the agent is terminated: agent budget exhausted: ${used}`);
      expect(model.doStreamCalls).toHaveLength(1);
      expect((await store.read(a.lifecycle)).map((r) => r.kind)).toEqual(['agent.spawning', 'agent.ready', 'turn.started', 'turn.interrupted', 'agent.terminated']);
      expect(await alsoCancelled).toMatchObject({ to: 'cancelled_result' });
      expect(checkInvariants(await storeLog(store))).toEqual([]);
      expect(errors).toEqual([]);
    },
  );

  it("a zero limit refuses even a new agent's first turn, sent right after its spawn, naming the limit", async () => {
    const store = memoryStore();
    const { engine, errors } = start({ script: toolThenAnswer, budget: { modelCalls: 0 } }, store);
    await engine.spawn(a.turn, 'turn-engine');
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'time?' }); // the lifecycle's spawn may not have landed yet
    await turnsDone(engine, 1);
    expect(await lastInterruption(store)).toMatch(/agent budget exhausted: modelCalls 0 of 0$/);
    expect((await runeWhere(engine, a.lifecycle, (r) => r.kind === 'agent.terminated')).event).toMatchObject({ type: 'budget_exhausted' });
    expect(errors).toEqual([]);
  });

  it('a limit the whole turn reaches: the turn completes, then the idle agent is terminated', async () => {
    const { engine, errors } = start({ script: toolThenAnswer, budget: { inputTokens: 250 } });
    const terminated = runeWhere(engine, a.lifecycle, (r) => r.kind === 'agent.terminated');
    const turn = await runTurn(engine, 'time?');
    expect(turn).toMatchObject({ output: 'It is noon.', reason: undefined });
    expect((await terminated).event).toEqual({ type: 'budget_exhausted', reason: 'agent budget exhausted: inputTokens 250 of 250' });
    expect(errors).toEqual([]);
  });

  it('through a SQLite file: the tool-call limit is used up, not passed, and the log is clean', async () => {
    const path = join(dir, 'agent-tool-calls.db');
    const { engine, errors } = start({ script: [...toolThenAnswer, ...toolThenAnswer], budget: { toolCalls: 1 } }, sqliteStore(path));
    const terminated = runeWhere(engine, a.lifecycle, (r) => r.kind === 'agent.terminated');
    expect(await runTurn(engine, 'time?')).toMatchObject({ output: 'It is noon.', turnUsage: { toolCalls: 1 } });
    expect((await terminated).event).toEqual({ type: 'budget_exhausted', reason: 'agent budget exhausted: toolCalls 1 of 1' });
    await engine.close();

    const reopened = sqliteStore(path);
    const log = await storeLog(reopened);
    expect(log.filter((r) => r.stream === a.lifecycle).at(-1)).toMatchObject({ kind: 'agent.terminated', to: 'terminated' });
    expect(checkInvariants(log)).toEqual([]);
    await reopened.close();
    expect(errors).toEqual([]);
  });

  it('an agent found over a budget lowered across a restart is terminated at start; its next turn is refused', async () => {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    const before = start({ script: toolThenAnswer }, kept);
    await runTurn(before.engine, 'time?');
    await before.engine.close();

    const { engine, model, errors } = start({ script: [], budget: { inputTokens: 200 } }, kept);
    expect((await runeWhere(engine, a.lifecycle, (r) => r.kind === 'agent.terminated')).event).toEqual({
      type: 'budget_exhausted',
      reason: 'agent budget exhausted: inputTokens 250 of 200',
    });
    await runTurn(engine, 'more?', 2);
    expect(await lastInterruption(store)).toBe('the agent is terminated: agent budget exhausted: inputTokens 250 of 200');
    expect(model.doStreamCalls).toHaveLength(0);
    expect(errors).toEqual([]);
  });
});

describe('agent budgets: per role', () => {
  it("an agent of a role has its role's budget (its AgentProfile's) in place of the default", async () => {
    const model = scriptedModel([{ text: 'one' }, { text: 'two' }]);
    const engine = createEngine({ epics: agentEpics({ model, budget: { modelCalls: 5 }, agents: { scout: { budget: { modelCalls: 1 } } } }) });
    engines.push(engine);
    const scout = agentStreams('conv/c1', 'scout-1');
    const other = agentStreams('conv/c1', 'other-1');
    await engine.spawn(scout.lifecycle, 'agent-lifecycle', { agentId: 'scout-1', role: 'scout' }); // spawned with its role, as a conversation does
    for (const agent of [scout, other]) {
      await engine.spawn(agent.turn, 'turn-engine');
      await runeWhere(engine, agent.lifecycle, (r) => r.kind === 'agent.ready');
      const ended = runeWhere(engine, agent.lifecycle, (r) => r.kind === 'turn.completed');
      await engine.dispatch(agent.turn, { type: 'start_turn', input: 'go' });
      await ended;
    }
    expect((await runeWhere(engine, scout.lifecycle, (r) => r.kind === 'agent.terminated')).event).toEqual({
      type: 'budget_exhausted',
      reason: 'agent budget exhausted: modelCalls 1 of 1',
    });
    expect((await stateOf<AgentLifecycleState>(engine, other.lifecycle)).value).toBe('idle');
  });
});

describe('agent budgets: per conversation', () => {
  it.each(crossedByFirstResponse)('%s: the turn is interrupted, the conversation suspended until budget_replenished raises the limit', async (dimension, budget, used) => {
    const store = memoryStore();
    const { engine, model, errors } = start({ script: [...waitThenAnswer, ...toolThenAnswer], conversationBudget: budget }, store);
    const suspended = runeWhere(engine, a.root, (r) => r.kind === 'session.suspended');
    const cancelled = Promise.all(['call_1_0', 'call_1_1'].map((id) => runeWhere(engine, a.call(id), (r) => r.kind === 'tool.result')));
    const turn = await runTurn(engine, 'time?');
    expect(turn.reason).toBe(`conversation budget exhausted: ${used}`);
    const [usedAmount, limit] = used
      .split(' ')
      .slice(1, 4)
      .filter((_, i) => i !== 1)
      .map(Number);
    expect((await suspended).event).toMatchObject({
      type: 'budget_exhausted',
      reason: `conversation budget exhausted: ${used}`,
      budgetInfo: { dimension, used: usedAmount, limit, usage: { modelCalls: 1 }, budget },
    });

    // Suspended: a new turn is interrupted with the conversation's reason; the agent lives on.
    await runTurn(engine, 'still there?', 2);
    expect(await lastInterruption(store)).toBe(`the conversation is suspended: conversation budget exhausted: ${used}`);
    expect(model.doStreamCalls).toHaveLength(1);
    expect(await stateOf<AgentLifecycleState>(engine, a.lifecycle)).toMatchObject({ value: 'idle' });

    // Replenished with a higher limit: turns run again.
    const raised: Budget = { [dimension]: 1000 };
    expect(await engine.dispatch(a.root, { type: 'budget_replenished', budget: raised })).toMatchObject({ accepted: true, rune: { kind: 'session.unsuspended' } });
    expect(await runTurn(engine, 'time now?', 3)).toMatchObject({ value: 'idle', output: 'It is noon.' });
    expect(await stateOf<ConversationState>(engine, a.root)).toMatchObject({ value: 'active', budget: raised });
    expect((await cancelled).map((r) => r.to)).toEqual(['cancelled_result', 'cancelled_result']);
    expect(checkInvariants(await storeLog(store))).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('a bare budget_replenished keeps the limits: a conversation still over them is suspended again at once', async () => {
    const store = memoryStore();
    const { engine, model, errors } = start({ script: toolThenAnswer, conversationBudget: { modelCalls: 2 } }, store);
    await runTurn(engine, 'time?');
    const first = await runeWhere(engine, a.root, (r) => r.kind === 'session.suspended');
    const again = runeWhere(engine, a.root, (r) => r.kind === 'session.suspended' && r.seq > first.seq);
    expect(await engine.dispatch(a.root, { type: 'budget_replenished' })).toMatchObject({ accepted: true });
    expect((await again).event).toMatchObject({ reason: 'conversation budget exhausted: modelCalls 2 of 2' });
    await runTurn(engine, 'more?', 2);
    expect(await lastInterruption(store)).toBe('the conversation is suspended: conversation budget exhausted: modelCalls 2 of 2');
    expect(model.doStreamCalls).toHaveLength(2);
    expect(checkInvariants(await storeLog(store))).toEqual([]);
    expect(errors).toEqual([]);
  });
});

/** A second agent of the same conversation as {@link a}. */
const b = agentStreams('conv/c1', 'a2');

/** A tool whose calls end when the test says (`release`): a turn waits in its tool round meanwhile. */
function heldTool() {
  let release = (): void => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const hold = defineTool({
    name: 'hold',
    description: 'Holds.',
    inputSchema: z.object({}),
    rerunSafe: true,
    timeoutMs: Infinity,
    execute: () => released.then(() => 'held'),
  });
  return { hold, release };
}

/** Starts a turn of `agent` (spawning it first when asked) and waits for it to end and be finalized. */
async function turnOf(engine: Engine, agent: typeof b, input: string, turn: number): Promise<TurnEngineState> {
  if (turn === 1) {
    await engine.spawn(agent.turn, 'turn-engine');
    await runeWhere(engine, agent.lifecycle, (r) => r.kind === 'agent.ready');
  }
  await engine.dispatch(agent.turn, { type: 'start_turn', input });
  return firstValueFrom(engine.state$<TurnEngineState>(agent.turn).pipe(filter((s) => s.value === 'idle' && s.turn === turn)));
}

describe("agent budgets: a conversation's running turns count (the model's answers reach its usage only when a turn ends)", () => {
  it("another agent's answered calls stop a turn at its tool round, and refuse a new turn, before a call past the limit", async () => {
    const store = memoryStore();
    const { engine, model, errors } = start({ script: [waitThenAnswer[0]!, ...toolThenAnswer, ...toolThenAnswer], conversationBudget: { modelCalls: 2 } }, store);
    // a1's turn has one answered call and waits on its tools: the conversation's usage does not show it yet.
    await spawnAgent(engine);
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'wait' });
    await firstValueFrom(engine.state$<TurnEngineState>(a.turn).pipe(filter((s) => s.value === 'tool_executing')));
    // a2's first answer is the second: the limit is reached, so a2 makes no call after its round.
    const second = await turnOf(engine, b, 'time?', 1);
    expect(second).toMatchObject({ value: 'idle', reason: 'conversation budget exhausted: modelCalls 2 of 2' });
    expect(model.doStreamCalls).toHaveLength(2);
    // Nor does a new turn start, though only a2's call has reached the conversation's usage (its agents').
    await firstValueFrom(engine.state$<AgentLifecycleState>(b.lifecycle).pipe(filter((s) => s.usage.modelCalls === 1))); // the conversation's usage: a2's
    expect(await turnOf(engine, b, 'again?', 2)).toMatchObject({ reason: 'conversation budget exhausted: modelCalls 2 of 2' });
    expect(model.doStreamCalls).toHaveLength(2);
    expect(errors).toEqual([]);
  });

  it('a turn whose tool round ends after the others used the limit up is interrupted, not given a call past it', async () => {
    const store = memoryStore();
    const { hold, release } = heldTool();
    const script: ScriptStep[] = [{ toolCalls: [{ toolName: 'hold', input: {} }], usage: { inputTokens: 100, outputTokens: 10 } }, toolThenAnswer[1]!, toolThenAnswer[1]!];
    const { engine, model, errors } = start({ script, tools: [clock, wait, hold], conversationBudget: { modelCalls: 2 } }, store);
    await spawnAgent(engine);
    await engine.dispatch(a.turn, { type: 'start_turn', input: 'hold' });
    await firstValueFrom(engine.state$<TurnEngineState>(a.turn).pipe(filter((s) => s.value === 'tool_executing')));
    // a2's turn completes: its call reaches the conversation (1 of 2), a1's is still a1's turn's.
    expect(await turnOf(engine, b, 'time?', 1)).toMatchObject({ value: 'idle', output: 'It is noon.' });
    await firstValueFrom(engine.state$<AgentLifecycleState>(b.lifecycle).pipe(filter((s) => s.usage.modelCalls === 1))); // the conversation's usage: a2's
    release();
    const first = await turnsDone(engine, 1);
    expect(first.reason).toBe('conversation budget exhausted: modelCalls 2 of 2');
    expect(model.doStreamCalls).toHaveLength(2);
    // Its end brings its call to the conversation: 2 of 2, suspended.
    expect((await runeWhere(engine, a.root, (r) => r.kind === 'session.suspended')).event).toMatchObject({ reason: 'conversation budget exhausted: modelCalls 2 of 2' });
    expect(checkInvariants(await storeLog(store))).toEqual([]);
    expect(errors).toEqual([]);
  });
});

describe('agent budgets: wall clock (virtual time)', () => {
  const waiting: ScriptStep[] = [{ toolCalls: [{ toolName: 'wait', input: {} }] }];

  /** Starts a turn that waits in its tool round, and lets virtual time run to `until`. */
  async function waitingTurn(options: Partial<AgentEpicsOptions>, until: number) {
    const store = memoryStore();
    const scheduler = new VirtualTimeScheduler(undefined, until);
    const run = start({ script: waiting, ...options }, store, scheduler);
    await new Promise((resolve) => setImmediate(resolve)); // the epics start
    await spawnAgent(run.engine);
    await run.engine.dispatch(a.turn, { type: 'start_turn', input: 'wait' });
    await runeWhere(run.engine, a.call('call_1_0'), (r) => r.to === 'executing');
    const done = turnsDone(run.engine, 1);
    scheduler.flush();
    return { ...run, store, turn: await done };
  }

  it.each([
    ['budget', 'agent'],
    ['conversationBudget', 'conversation'],
  ] as const)('%s: a durable deadline interrupts the turn when its wall clock runs out', async (option, whose) => {
    const { engine, store, turn, errors } = await waitingTurn({ [option]: { wallClockMs: 30_000 } }, 60_000);
    expect(turn.reason).toMatch(new RegExp(`^${whose} budget exhausted: wallClockMs 3\\d{4} of 30000$`));
    const interrupted = (await store.read(a.turn)).find((r) => r.kind === 'turn.interrupted')!;
    expect(interrupted.at).toBeGreaterThanOrEqual(30_000);
    expect(interrupted.at).toBeLessThan(32_000); // the deadline's resolution is a second
    // The call is cancelled once the turn's end is heard, behind its claim's commit: waited for, not read at once.
    await runeWhere(engine, a.call('call_1_0'), (r) => r.to === 'cancelled_result');
    expect((await store.read(a.call('call_1_0'))).map((r) => r.kind)).toEqual(['tool.call', 'no_approval_needed', 'tool.claimed', 'tool.result']);
    const ended = (await store.read(a.lifecycle)).find((r) => r.kind === 'turn.interrupted')!;
    expect(ended.event).toMatchObject({ usage: { wallClockMs: interrupted.at } });
    if (whose === 'agent') await runeWhere(engine, a.lifecycle, (r) => r.kind === 'agent.terminated');
    else await runeWhere(engine, a.root, (r) => r.kind === 'session.suspended');
    expect(checkInvariants(await storeLog(store))).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('a restart mid-turn re-arms the deadline from the turn.started rune, not from the restart', async () => {
    const store = memoryStore();
    const kept = { ...store, close: async () => {} };
    const before = start({ script: waiting, budget: { wallClockMs: 30_000 } }, kept, new VirtualTimeScheduler());
    await new Promise((resolve) => setImmediate(resolve));
    await spawnAgent(before.engine);
    await before.engine.dispatch(a.turn, { type: 'start_turn', input: 'wait' }); // at 0
    await runeWhere(before.engine, a.call('call_1_0'), (r) => r.to === 'executing');
    await before.engine.close(); // the process dies mid-turn, its tool running

    const scheduler = new VirtualTimeScheduler(undefined, 60_000);
    scheduler.frame = 10_000; // it comes back 10 s later
    const { engine, errors } = start({ script: [], budget: { wallClockMs: 30_000 } }, kept, scheduler);
    await new Promise((resolve) => setImmediate(resolve)); // epics start, resume the turn and its call (rerunSafe: it runs again)
    const done = turnsDone(engine, 1);
    scheduler.flush();
    const turn = await done;
    expect(turn.reason).toMatch(/^agent budget exhausted: wallClockMs 3\d{4} of 30000$/);
    const interrupted = (await store.read(a.turn)).find((r) => r.kind === 'turn.interrupted')!;
    expect(interrupted.at).toBeLessThan(32_000); // 30 s after the turn started, not after the restart
    await runeWhere(engine, a.lifecycle, (r) => r.kind === 'agent.terminated');
    expect(checkInvariants(await storeLog(store))).toEqual([]);
    expect(errors).toEqual([]);
  });
});
