import { seedExampleInputs } from '../fixtures/seed-004-inputs.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  AgentState,
  agentTransition,
  initialAgentState,
  reactAgent,
  reactAgentEffectsAt,
  stepUnknown,
  type AgentInput,
  type AgentTransitionOptions,
} from '../../src/index.js';
import { effectiveTimestamp } from '../../src/reducers/react-agent/transition.js';
import { checkMachineProperties } from '../support/machine-properties.js';
import { drawnEdges, generatedEdges, readSeed } from '../support/seed-diagram.js';

const SEED = '004_f3a58cfbf94bc998.txt';

/** Folds inputs from `state`, failing loudly if one is rejected: fixtures are built by the machine itself. */
function fold(inputs: readonly AgentInput[], state = initialAgentState(), options?: AgentTransitionOptions): AgentState {
  for (const input of inputs) {
    const next = agentTransition(input, options)(state);
    expect(next, `fixture input rejected: ${JSON.stringify(input)}`).not.toBe(state);
    state = next;
  }
  return state;
}

const userMessage = (messageId: string, timestamp: number, content = 'Hello, Agent!'): AgentInput => ({
  type: 'user-message-received',
  messageId,
  content,
  timestamp,
});
const continueReAct = (timestamp: number, calledLlmAt: number, ...ids: string[]): AgentInput => ({
  type: 're-act-observed',
  timestamp,
  calledLlmAt,
  observation: {
    type: 'continue-re-act',
    toolCalls: Object.fromEntries(ids.map((id) => [id, { name: 'search', parameters: '{"query":"example"}', calledAt: timestamp }])),
  },
});
const completeReAct = (timestamp: number, calledLlmAt: number): AgentInput => ({
  type: 're-act-observed',
  timestamp,
  calledLlmAt,
  observation: { type: 'complete-re-act' },
});
const toolResult = (toolCallId: string, timestamp: number): AgentInput => ({
  type: 'tool-call-completed',
  toolCallId,
  result: { isSuccess: true, content: 'Search results...', receivedAt: timestamp },
  timestamp,
});

const claim = (toolCallId: string, claimId: string, timestamp: number, supersedes?: string): AgentInput => ({
  type: 'tool-call-claimed',
  toolCallId,
  claim: claimId,
  ...(supersedes === undefined ? {} : { supersedes }),
  timestamp,
});

// The ReAct loop of the seed's "Dispatching Events", step by step.
const afterUser = fold([userMessage('m1', 1)]);
const streaming = fold([{ type: 'llm-message-started', messageId: 'a1', timestamp: 2 }], afterUser);
const answered = fold([{ type: 'llm-message-completed', messageId: 'a1', content: 'Hello!', timestamp: 3 }], streaming);
const toolInFlight = fold([continueReAct(2, 1, 't1')], afterUser);
const toolDone = fold([toolResult('t1', 3)], toolInFlight);
const loopClosed = fold([completeReAct(4, 3)], toolDone);
const nextLoop = fold([userMessage('m2', 5)], loopClosed);
const claimed = fold([claim('t1', 'run-a', 3)], toolInFlight);

describe('agentTransition: llm-round-answered (ours: a round of the model call in progress, with its usage)', () => {
  const round = (calledLlmAt: number, timestamp: number): AgentInput => ({
    type: 'llm-round-answered',
    calledLlmAt,
    usage: { inputTokens: 7, outputTokens: 1, modelCalls: 1, toolCalls: 0, wallClockMs: 0 },
    timestamp,
  });

  it('is taken for the call due, as a rune of its own kind, and moves nothing but the clock: the call is still due', () => {
    const step = reactAgent.step(afterUser, round(1, 2));
    expect(step).toMatchObject({ accepted: true, kind: 'llm-round-answered', state: { ...afterUser, updatedAt: 2 } });
    expect(step.accepted && reactAgentEffectsAt(step.state)).toEqual(reactAgentEffectsAt(afterUser));
    expect(reactAgent.inputs.find((row) => row.on === 'llm-round-answered')).toMatchObject({ kind: 'llm-round-answered', source: 'extension' });
  });

  it('is refused for no loop, and for a call the loop has already observed', () => {
    expect(reactAgent.step(initialAgentState(), round(1, 2))).toMatchObject({ accepted: false, code: 'not_allowed', reason: 'no ReAct loop is in progress' });
    expect(reactAgent.step(toolDone, round(1, 4))).toMatchObject({
      accepted: false,
      code: 'not_allowed',
      reason: "stale round: calledLlmAt 1 is not after the state's calledLlmAt 1",
    });
  });
});

describe('agentTransition: tool-call-claimed (ours: a tool call claimed before its tool starts)', () => {
  it('an unclaimed call in flight takes a claim that supersedes nothing: its first attempt', () => {
    expect(claimed.toolCalls['t1']).toEqual({ ...toolInFlight.toolCalls['t1'], claim: 'run-a', attempt: 1 });
    expect(claimed.updatedAt).toBe(3);
    // Nothing else moves: the call is still in flight, so its tool is still due and the LLM still waits.
    expect(reactAgentEffectsAt(claimed)).toEqual(reactAgentEffectsAt(toolInFlight));
  });

  it('a claimed call takes only a claim that supersedes its current one (a re-run after a takeover)', () => {
    const rerun = fold([claim('t1', 'run-b', 4, 'run-a')], claimed);
    expect(rerun.toolCalls['t1']).toMatchObject({ claim: 'run-b', attempt: 2, result: null });
    // Two survivors both name the dead claim: the first is taken, the second refused.
    expect(agentTransition(claim('t1', 'run-c', 5, 'run-a'))(rerun)).toBe(rerun);
  });

  it("appends a tool.claimed rune with the payload of the tool-call machine's, and says so in its table", () => {
    expect(reactAgent.step(toolInFlight, claim('t1', 'run-a', 3))).toEqual({
      accepted: true,
      state: claimed,
      kind: 'tool.claimed',
      payload: { callId: 't1', claim: 'run-a', attempt: 1, supersedes: undefined },
    });
    expect(reactAgent.step(claimed, claim('t1', 'run-b', 4, 'run-a'))).toMatchObject({
      accepted: true,
      kind: 'tool.claimed',
      payload: { callId: 't1', claim: 'run-b', attempt: 2, supersedes: 'run-a' },
    });
    expect(reactAgent.inputs.find((row) => row.on === 'tool-call-claimed')).toMatchObject({ kind: 'tool.claimed', source: 'extension' });
    expect(reactAgent.inputs.filter((row) => row.source === 'seed').map((row) => [row.on, row.kind])).toEqual(
      reactAgent.events.filter((type) => type !== 'tool-call-claimed' && type !== 'llm-round-answered').map((type) => [type, type]),
    );
  });

  it('refuses a claim id the schema does not take', () => {
    const step = stepUnknown(reactAgent, toolInFlight, { type: 'tool-call-claimed', toolCallId: 't1', claim: '', timestamp: 3 });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event', state: toolInFlight });
  });
});

describe('agentTransition: every input of seed 004, accepted', () => {
  const cases: Array<[string, AgentState, AgentInput, (next: AgentState) => void]> = [
    [
      'user-message-received opens a ReAct loop',
      initialAgentState(),
      userMessage('m1', 1),
      (next) => {
        expect(next.messages).toEqual([{ id: 'm1', role: 'user', content: 'Hello, Agent!', timestamp: 1 }]);
        expect(next.reActContext).toEqual({ contextWindowSize: 10, toolCallIds: [], startedAt: 1, updatedAt: 1 });
        expect(next.updatedAt).toBe(1);
      },
    ],
    [
      'user-message-received joins the loop in progress, its window one message wider',
      toolInFlight,
      userMessage('m2', 3),
      (next) => {
        expect(next.messages.map((m) => m.id)).toEqual(['m1', 'm2']);
        expect(next.reActContext).toEqual({ contextWindowSize: 11, toolCallIds: ['t1'], startedAt: 1, updatedAt: 3 });
      },
    ],
    [
      'llm-message-started appends an empty, streaming assistant message',
      afterUser,
      { type: 'llm-message-started', messageId: 'a1', timestamp: 2 },
      (next) => {
        expect(next.messages[1]).toEqual({ id: 'a1', role: 'assistant', content: '', timestamp: 2, streaming: true });
        expect(next.reActContext).toBe(afterUser.reActContext);
      },
    ],
    [
      'llm-message-completed sets the content and keeps the start timestamp',
      streaming,
      { type: 'llm-message-completed', messageId: 'a1', content: 'Hello!', timestamp: 3 },
      (next) => {
        expect(next.messages[1]).toEqual({ id: 'a1', role: 'assistant', content: 'Hello!', timestamp: 2, streaming: false });
        expect(next.updatedAt).toBe(3);
      },
    ],
    [
      're-act-observed continue-re-act issues its tool calls',
      afterUser,
      continueReAct(2, 1, 't1', 't2'),
      (next) => {
        expect(next.toolCalls).toEqual({
          t1: { name: 'search', parameters: '{"query":"example"}', calledAt: 2, result: null },
          t2: { name: 'search', parameters: '{"query":"example"}', calledAt: 2, result: null },
        });
        expect(next.reActContext).toMatchObject({ toolCallIds: ['t1', 't2'], updatedAt: 2 });
        expect(next.calledLlmAt).toBe(1);
      },
    ],
    [
      're-act-observed continue-re-act never overwrites a known tool call',
      fold([userMessage('m2', 5)], loopClosed),
      continueReAct(6, 5, 't1', 't2'),
      (next) => {
        expect(next.toolCalls.t1).toBe(nextLoop.toolCalls.t1);
        expect(next.toolCalls.t2?.result).toBeNull();
        expect(next.reActContext?.toolCallIds).toEqual(['t1', 't2']);
      },
    ],
    [
      're-act-observed complete-re-act ends the loop',
      answered,
      completeReAct(4, 1),
      (next) => {
        expect(next.reActContext).toBeNull();
        expect(next.calledLlmAt).toBe(1);
        expect(next.messages).toBe(answered.messages);
      },
    ],
    [
      'tool-call-completed records the result, stamped with the input timestamp',
      toolInFlight,
      { type: 'tool-call-completed', toolCallId: 't1', result: { isSuccess: false, error: 'timeout', receivedAt: 99 }, timestamp: 3 },
      (next) => {
        expect(next.toolCalls.t1?.result).toEqual({ isSuccess: false, error: 'timeout', receivedAt: 3 });
        expect(next.updatedAt).toBe(3);
      },
    ],
    [
      'context-window-expanded widens the window, up to every message',
      fold([userMessage('m1', 1), completeReAct(2, 1), userMessage('m2', 3), userMessage('m3', 4)], initialAgentState(), {
        initialContextWindowSize: 1,
      }),
      { type: 'context-window-expanded', timestamp: 5 },
      (next) => {
        // Window 1 + 1 (m3 joined) = 2, then + 10, capped at the 3 messages.
        expect(next.reActContext).toMatchObject({ contextWindowSize: 3, updatedAt: 5 });
      },
    ],
    [
      'history-tool-calls-added brings tool calls of an earlier loop into this one',
      nextLoop,
      { type: 'history-tool-calls-added', toolCallIds: ['t1', 't1'], timestamp: 6 },
      (next) => {
        expect(next.reActContext).toMatchObject({ toolCallIds: ['t1'], updatedAt: 6 });
        expect(next.toolCalls).toBe(nextLoop.toolCalls);
      },
    ],
  ];

  it.each(cases)('%s', (_, state, input, check) => {
    const step = reactAgent.step(state, input);
    expect(step).toMatchObject({ accepted: true, kind: input.type });
    const next = agentTransition(input)(state);
    expect(next).not.toBe(state);
    expect(step.state).toEqual(next);
    expect(reactAgent.transition(state, input)).toEqual(next);
    expect(AgentState.safeParse(next).success).toBe(true);
    check(next);
  });

  it('uses expandContextWindowSize as the window increment', () => {
    const state = fold([userMessage('m1', 1), completeReAct(2, 1), userMessage('m2', 3), userMessage('m3', 4), userMessage('m4', 5)], initialAgentState(), {
      initialContextWindowSize: 1,
    });
    expect(state.reActContext?.contextWindowSize).toBe(3);
    const next = agentTransition({ type: 'context-window-expanded', timestamp: 6 }, { expandContextWindowSize: 1 })(state);
    expect(next.reActContext?.contextWindowSize).toBe(4);
  });

  it('opens a loop with initialContextWindowSize', () => {
    const next = agentTransition(userMessage('m1', 1), { initialContextWindowSize: 3 })(initialAgentState());
    expect(next.reActContext?.contextWindowSize).toBe(3);
  });

  it('initialAgentState takes the external tools', () => {
    const tools = { search: { description: 'Search tool', schema: '{"type":"object","properties":{}}' } };
    expect(initialAgentState({ tools })).toEqual({
      updatedAt: 0,
      messages: [],
      tools,
      toolCalls: {},
      calledLlmAt: 0,
      reActContext: null,
    });
  });
});

describe('agentTransition: equal timestamps (time never goes back, and no input is lost to a clock)', () => {
  it("keeps all five inputs of the seed's example, each stamped with one Date.now()", () => {
    const now = 1_700_000_000_000;
    const inputs = seedExampleInputs(now);
    const state = fold(inputs);
    // Each took effect one millisecond after the one before: the log's order, strictly increasing.
    expect(state.updatedAt).toBe(now + 4);
    expect(state.messages).toEqual([
      { id: 'msg-1', role: 'user', content: 'Hello, Agent!', timestamp: now },
      { id: 'msg-2', role: 'assistant', content: 'Hello!', timestamp: now + 1, streaming: false },
    ]);
    expect(state.calledLlmAt).toBe(now);
    expect(state.toolCalls['tool-1']?.result).toEqual({ isSuccess: true, content: 'Search results...', receivedAt: now + 4 });
    // The result is newer than what the LLM last answered: the next call is due.
    expect(reactAgentEffectsAt(state)).toEqual({ [`call-llm:${now}`]: { type: 'call-llm', answersTo: now + 4 } });
  });

  it('an input stamped before the state takes effect just after it', () => {
    const next = agentTransition({ type: 'user-message-received', messageId: 'm2', content: 'late clock', timestamp: 0.5 })(afterUser);
    expect(next.updatedAt).toBe(2);
    expect(next.messages.map((m) => [m.id, m.timestamp])).toEqual([
      ['m1', 1],
      ['m2', 2],
    ]);
    expect(effectiveTimestamp(5, afterUser)).toBe(5);
    expect(effectiveTimestamp(1, afterUser)).toBe(2);
  });
});

describe('agentTransition: inputs that do not apply return the same state, and step says why', () => {
  const cases: Array<[AgentState, AgentInput, string]> = [
    [afterUser, userMessage('m1', 2), 'message "m1" already exists'],
    [afterUser, { type: 'llm-message-started', messageId: 'm1', timestamp: 2 }, 'message "m1" already exists'],
    [afterUser, { type: 'llm-message-completed', messageId: 'a9', content: 'x', timestamp: 2 }, 'no message "a9" to complete'],
    [afterUser, { type: 'llm-message-completed', messageId: 'm1', content: 'x', timestamp: 2 }, 'message "m1" is a user message, not an assistant one'],
    [answered, { type: 'llm-message-completed', messageId: 'a1', content: 'again', timestamp: 4 }, 'message "a1" is already completed'],
    [initialAgentState(), completeReAct(1, 1), 'no ReAct loop is in progress'],
    [loopClosed, continueReAct(5, 4, 't9'), 'no ReAct loop is in progress'],
    [toolDone, completeReAct(4, 1), `stale observation: calledLlmAt 1 is not after the state's calledLlmAt 1`],
    [toolDone, continueReAct(4, 0, 't2'), `stale observation: calledLlmAt 0 is not after the state's calledLlmAt 1`],
    [afterUser, toolResult('t9', 2), 'no tool call "t9"'],
    [toolDone, toolResult('t1', 4), 'tool call "t1" already has a result'],
    [loopClosed, { type: 'context-window-expanded', timestamp: 5 }, 'no ReAct loop is in progress'],
    [afterUser, { type: 'context-window-expanded', timestamp: 2 }, 'the context window (10) already covers all 1 messages'],
    [loopClosed, { type: 'history-tool-calls-added', toolCallIds: ['t1'], timestamp: 5 }, 'no ReAct loop is in progress'],
    [nextLoop, { type: 'history-tool-calls-added', toolCallIds: ['t1', 'x', 'y'], timestamp: 6 }, 'no tool call "x", "y" in the history'],
    [toolInFlight, { type: 'history-tool-calls-added', toolCallIds: ['t1'], timestamp: 3 }, 'every tool call given is already in the ReAct context'],
    [nextLoop, { type: 'history-tool-calls-added', toolCallIds: [], timestamp: 6 }, 'every tool call given is already in the ReAct context'],
    [afterUser, claim('t9', 'run-a', 2), 'no tool call "t9"'],
    [toolDone, claim('t1', 'run-a', 4), 'tool call "t1" already has a result'],
    [toolInFlight, claim('t1', 'run-b', 3, 'run-a'), 'tool call "t1" has no claim, so none "run-a" to supersede'],
    [claimed, claim('t1', 'run-b', 4), 'tool call "t1" is claimed by "run-a"'],
    [claimed, claim('t1', 'run-b', 4, 'run-x'), 'tool call "t1" is claimed by "run-a"'],
  ];

  it.each(cases)('%#: %o -> "%s"', (state, input, reason) => {
    expect(agentTransition(input)(state)).toBe(state);
    expect(reactAgent.transition(state, input)).toBe(state);
    expect(reactAgent.step(state, input)).toEqual({ accepted: false, state, code: 'not_allowed', reason });
  });
});

describe('reactAgent: the Machine contract', () => {
  it("is a data-state machine: no state names, no terminal state, the seed's seven inputs and our claim and round as events", () => {
    expect(reactAgent.id).toBe('react-agent');
    expect(reactAgent.states).toEqual([]);
    expect(reactAgent.terminal).toEqual([]);
    expect(reactAgent.events).toEqual([
      'user-message-received',
      'llm-message-started',
      'llm-message-completed',
      're-act-observed',
      'tool-call-completed',
      'context-window-expanded',
      'history-tool-calls-added',
      'tool-call-claimed',
      'llm-round-answered',
    ]);
    expect(reactAgent.initial()).toEqual(initialAgentState());
  });

  it('draws one state with a self-loop per input (the seed draws no diagram)', () => {
    expect(drawnEdges(readSeed(SEED))).toEqual([]);
    expect(generatedEdges(reactAgent.toMermaid())).toEqual(reactAgent.events.map((on) => ({ from: 'agent', to: 'agent', label: on })));
    expect(reactAgent.toMermaid().split('\n').slice(0, 2)).toEqual(['stateDiagram-v2', '  [*] --> agent']);
  });

  it('names the field of an input that fails its schema', () => {
    const step = stepUnknown(reactAgent, toolInFlight, { type: 'tool-call-completed', toolCallId: 't1', result: { isSuccess: true }, timestamp: 3 });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event', state: toolInFlight });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"invalid "tool-call-completed" event: result.content: Invalid input: expected string, received undefined; result.receivedAt: Invalid input: expected number, received undefined"`,
    );
  });

  it('rejects an unknown input type by name (the seed API list still says "llm-chunk")', () => {
    const step = stepUnknown(reactAgent, afterUser, { type: 'llm-chunk', messageId: 'a1', chunk: 'He', timestamp: 2 });
    expect(step).toMatchObject({ accepted: false, code: 'unknown_event' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"unknown event type "llm-chunk" for machine "react-agent"; expected one of: user-message-received, llm-message-started, llm-message-completed, re-act-observed, tool-call-completed, context-window-expanded, history-tool-calls-added, tool-call-claimed, llm-round-answered"`,
    );
    // A hand-built input that skips validation gets the same answer from step.
    expect(reactAgent.step(afterUser, { type: 'llm-chunk' } as never)).toMatchObject({ accepted: false, code: 'unknown_event' });
  });

  it('never throws out of transition or step, even for hand-built inputs that skip validation', () => {
    const bad = [null, undefined, 42, {}, { type: 'toString' }, { type: '__proto__' }, { type: 're-act-observed', calledLlmAt: 9, timestamp: 9 }];
    for (const state of [initialAgentState(), afterUser, toolInFlight, answered]) {
      for (const input of bad) {
        expect(agentTransition(input as never)(state)).toBe(state);
        expect(reactAgent.transition(state, input as never)).toBe(state);
        expect(reactAgent.step(state, input as never).accepted).toBe(false);
      }
    }
  });
});

describe('reactAgentEffectsAt: the effects of the ReAct loop', () => {
  it('wants nothing outside a ReAct loop', () => {
    expect(reactAgentEffectsAt(initialAgentState())).toEqual({});
    expect(reactAgentEffectsAt(loopClosed)).toEqual({});
  });

  it('calls the LLM for a user message newer than calledLlmAt', () => {
    expect(reactAgentEffectsAt(afterUser)).toEqual({ 'call-llm:0': { type: 'call-llm', answersTo: 1 } });
  });

  it('runs each tool call of the loop that has no result, and the LLM waits for the last one', () => {
    const two = fold([continueReAct(2, 1, 't1', 't2')], afterUser);
    const t1 = { type: 'call-tool', name: 'search', parameters: '{"query":"example"}' } as const;
    expect(reactAgentEffectsAt(two)).toEqual({
      'call-tool:t1': { ...t1, toolCallId: 't1' },
      'call-tool:t2': { ...t1, toolCallId: 't2' },
    });
    const oneDone = fold([toolResult('t1', 3)], two);
    expect(reactAgentEffectsAt(oneDone)).toEqual({ 'call-tool:t2': { ...t1, toolCallId: 't2' } });
    // A user message during the tool calls waits too.
    expect(Object.keys(reactAgentEffectsAt(fold([userMessage('m2', 4)], oneDone)))).toEqual(['call-tool:t2']);
    expect(reactAgentEffectsAt(fold([toolResult('t2', 4)], oneDone))).toEqual({ 'call-llm:1': { type: 'call-llm', answersTo: 4 } });
  });

  it('calls the LLM again for a tool result newer than calledLlmAt', () => {
    expect(reactAgentEffectsAt(toolDone)).toEqual({ 'call-llm:1': { type: 'call-llm', answersTo: 3 } });
  });

  it('counts the results of history tool calls brought into the loop', () => {
    const withHistory = fold([{ type: 'history-tool-calls-added', toolCallIds: ['t1'], timestamp: 6 }], nextLoop);
    expect(reactAgentEffectsAt(withHistory)).toEqual({ 'call-llm:3': { type: 'call-llm', answersTo: 5 } });
  });

  it('keeps the LLM key while the call streams and while new messages arrive; moves it with calledLlmAt', () => {
    const keys = (s: AgentState) => Object.keys(reactAgentEffectsAt(s));
    expect(keys(streaming)).toEqual(['call-llm:0']);
    expect(keys(answered)).toEqual(['call-llm:0']);
    const another = fold([userMessage('m2', 4)], answered);
    expect(reactAgentEffectsAt(another)).toEqual({ 'call-llm:0': { type: 'call-llm', answersTo: 4 } });
    // The running call answered up to 1; m2 is newer, so the next call is due under the next key.
    expect(reactAgentEffectsAt(fold([completeReAct(5, 1)], another))).toEqual({});
    expect(reactAgentEffectsAt(fold([continueReAct(5, 1)], another))).toEqual({ 'call-llm:1': { type: 'call-llm', answersTo: 4 } });
  });
});

// Inputs from pools of ids, so completions and results often hit existing messages and calls.
type MakeInput = (timestamp: number) => AgentInput;
// Enough user message ids for more messages than a window of 10; a few ids shared with the LLM's.
const userMessageId = fc.integer({ min: 1, max: 24 }).map((n) => (n <= 2 ? `a${n}` : `m${n}`));
const messageId = fc.constantFrom('m3', 'a1', 'a2');
const toolCallId = fc.constantFrom('t1', 't2', 't3');
const makeInput: fc.Arbitrary<MakeInput> = fc.oneof(
  fc.tuple(userMessageId, fc.string({ maxLength: 8 })).map(
    ([id, content]): MakeInput =>
      (t) =>
        userMessage(id, t, content),
  ),
  messageId.map(
    (id): MakeInput =>
      (t) => ({ type: 'llm-message-started', messageId: id, timestamp: t }),
  ),
  fc.tuple(messageId, fc.string({ maxLength: 8 })).map(
    ([id, content]): MakeInput =>
      (t) => ({ type: 'llm-message-completed', messageId: id, content, timestamp: t }),
  ),
  fc.tuple(fc.nat({ max: 4 }), fc.option(fc.uniqueArray(toolCallId, { maxLength: 2 }), { nil: undefined })).map(
    ([lag, ids]): MakeInput =>
      (t) =>
        ids === undefined ? completeReAct(t, t - lag) : continueReAct(t, t - lag, ...ids),
  ),
  fc.tuple(toolCallId, fc.boolean()).map(
    ([id, ok]): MakeInput =>
      (t) => ({
        type: 'tool-call-completed',
        toolCallId: id,
        result: ok ? { isSuccess: true, content: 'ok', receivedAt: t } : { isSuccess: false, error: 'boom', receivedAt: t },
        timestamp: t,
      }),
  ),
  fc.constant<MakeInput>((t) => ({ type: 'context-window-expanded', timestamp: t })),
  fc.uniqueArray(toolCallId, { maxLength: 3 }).map(
    (ids): MakeInput =>
      (t) => ({ type: 'history-tool-calls-added', toolCallIds: ids, timestamp: t }),
  ),
  fc.tuple(toolCallId, fc.constantFrom('r1', 'r2'), fc.option(fc.constantFrom('r1', 'r2'), { nil: undefined })).map(
    ([id, claimId, supersedes]): MakeInput =>
      (t) =>
        claim(id, claimId, t, supersedes),
  ),
);

/** What every reachable state keeps. */
function expectAgentInvariants(state: AgentState): void {
  const stamps = state.messages.map((m) => m.timestamp);
  expect(stamps, 'messages in timestamp order').toEqual([...stamps].sort((a, b) => a - b));
  expect(new Set(state.messages.map((m) => m.id)).size).toBe(state.messages.length);
  for (const m of state.messages) expect(m.timestamp).toBeLessThanOrEqual(state.updatedAt);
  const ids = state.reActContext?.toolCallIds ?? [];
  expect(new Set(ids).size).toBe(ids.length);
  for (const id of ids) expect(Object.hasOwn(state.toolCalls, id), `context names unknown tool call ${id}`).toBe(true);
  const effects = reactAgentEffectsAt(state);
  const llm = Object.keys(effects).filter((k) => k.startsWith('call-llm:'));
  const tools = Object.keys(effects).filter((k) => k.startsWith('call-tool:'));
  expect(llm.length + tools.length).toBe(Object.keys(effects).length);
  expect(llm.length === 0 || tools.length === 0, 'the LLM is never called with a tool call in flight').toBe(true);
  for (const key of llm) {
    expect(key).toBe(`call-llm:${state.calledLlmAt}`);
    expect((effects[key] as { answersTo: number }).answersTo).toBeGreaterThan(state.calledLlmAt);
  }
  for (const key of tools) expect(state.toolCalls[key.slice('call-tool:'.length)]?.result).toBeNull();
  for (const call of Object.values(state.toolCalls)) expect(call.claim === undefined, 'a claim comes with its attempt').toBe(call.attempt === undefined);
}

describe('reactAgent: properties', () => {
  it('random input sequences keep every machine property', () => {
    const event = fc.tuple(makeInput, fc.integer({ min: 1, max: 60 })).map(([make, t]) => make(t));
    checkMachineProperties(reactAgent, {
      event,
      onAccepted: (state, input, next) => {
        expect(next.updatedAt).toBe(input.timestamp > state.updatedAt ? input.timestamp : state.updatedAt + 1);
        expectAgentInvariants(next);
      },
    });
  });

  // With random timestamps most inputs are lifted past `updatedAt`; with rising ones the loop goes deep.
  it('sequences with rising timestamps: rejected means the same object and a reason; accepted keeps the invariants', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(makeInput, fc.integer({ min: 1, max: 3 })), { minLength: 20, maxLength: 80, size: 'max' }), (steps) => {
        let state = reactAgent.initial();
        let t = 0;
        for (const [make, gap] of steps) {
          t += gap;
          const input = make(t);
          const next = reactAgent.transition(state, input);
          const step = reactAgent.step(state, input);
          if (next === state) {
            expect(step).toMatchObject({ accepted: false, state, code: 'not_allowed' });
            expect(!step.accepted && step.reason.length).toBeGreaterThan(0);
          } else {
            expect(step).toMatchObject({ accepted: true, kind: input.type === 'tool-call-claimed' ? 'tool.claimed' : input.type });
            expect(step.state).toEqual(next);
            expect(AgentState.safeParse(next).success).toBe(true);
            expect(next.updatedAt).toBe(t);
            expectAgentInvariants(next);
            state = next;
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});
