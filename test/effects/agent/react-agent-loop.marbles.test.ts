import { of, throwError, type Observable } from 'rxjs';
import { marbleTest, type Marbles } from '../../support/marbles.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentTransition, initialAgentState, type AgentInput, type AgentState, type EpicReport, type Rune, type StreamHead } from '../../../src/index.js';
import type { ModelCaller } from '../../../src/effects/agent/agent-model.js';
import { MAX_INTERNAL_ROUNDS } from '../../../src/effects/agent/react-agent-effects.js';
import { reactAgentLoop } from '../../../src/effects/agent/react-agent-epics.js';
import type { ChainOutput, ModelPart, ModelRequest } from '../../../src/effects/llm/model-types.js';
import { defineTool } from '../../../src/effects/tools/tool.js';
import { epicContext } from '../../support/epic-context.js';

/**
 * The ReAct agent's effects as the engine hosts them (`reactAgentLoop`, a state-derived epic),
 * under `TestScheduler.run`: a hot observable of runes in, commands out; the model caller returns
 * cold observables; the context holds each stream's state after the runes seen so far.
 */

const REACT = 'conv/c1/agent/a1/react';

/** The runes of `inputs` on `stream`, each with the state after it (every input must apply). */
function history(inputs: readonly AgentInput[], stream = REACT, state = initialAgentState()): { runes: Rune[]; states: Map<Rune, AgentState>; state: AgentState } {
  const states = new Map<Rune, AgentState>();
  const runes = inputs.map((event, i) => {
    const next = agentTransition(event)(state);
    expect(next, `fixture input rejected: ${JSON.stringify(event)}`).not.toBe(state);
    state = next;
    const rune: Rune = { stream, seq: i + 2, machine: 'react-agent', kind: event.type, event, at: event.timestamp };
    states.set(rune, state);
    return rune;
  });
  return { runes, states, state };
}

const ask = (messageId: string, timestamp: number, content = 'hi'): AgentInput => ({ type: 'user-message-received', messageId, content, timestamp });
const part = (p: ModelPart): ChainOutput => ({ type: 'part', part: p });
const text = (t: string) => part({ type: 'text-delta', text: t });
const toolCall = (toolCallId: string, toolName: string, input: unknown) => part({ type: 'tool-call', toolCallId, toolName, input });
const finish = part({ type: 'finish', finishReason: 'stop' });
/** What a call's answered rounds used, as its `re-act-observed` records it: `modelCalls` rounds, no tokens reported. */
const used = (modelCalls: number, tokens: { inputTokens?: number; outputTokens?: number } = {}) => ({
  inputTokens: 0,
  outputTokens: 0,
  modelCalls,
  toolCalls: 0,
  wallClockMs: 0,
  ...tokens,
});
/** What a model call or a tool run of the loop made says so (its rune's origin); the claim before a run is the loop's own. */
const madeBy = (type: unknown): { by?: 'model' | 'tool' } => (type === 'tool-call-completed' ? { by: 'tool' } : type === 'tool-call-claimed' ? {} : { by: 'model' });
const toAgent = (event: Record<string, unknown>, by = madeBy(event.type)) => ({ stream: REACT, event, ...by });

const add = defineTool({ name: 'add', description: 'Adds', inputSchema: z.object({ a: z.number(), b: z.number() }), execute: ({ a, b }) => a + b });
const shaky = defineTool({ name: 'shaky', description: 'Not safe to run twice', inputSchema: z.object({}), execute: () => 'ran' });
const steady = defineTool({ name: 'steady', description: 'Safe to run again', inputSchema: z.object({}), rerunSafe: true, execute: () => 'ran' });

/** A caller answering call n with `answers[n]`; a context holding the state of each stream after the runes seen. */
function setup(
  m: Marbles,
  runes$: Observable<Rune>,
  states: Map<Rune, AgentState>,
  answers: readonly Observable<ChainOutput>[],
  overrides: Parameters<typeof epicContext>[1] = {},
) {
  const requests: ModelRequest[] = [];
  const call: ModelCaller = (request) => {
    requests.push(request);
    return answers[requests.length - 1] ?? throwError(() => new Error(`no answer for call ${requests.length}`));
  };
  const current = new Map<string, AgentState>();
  runes$.subscribe((rune) => current.set(rune.stream, states.get(rune)!));
  const reports: EpicReport[] = [];
  const context = epicContext(m.scheduler, { state: ((stream: string) => current.get(stream)) as never, report: (r) => reports.push(r), ...overrides });
  return { requests, context, call, reports };
}

describe('reactAgentLoop: the effects of a ReAct stream, from its state', () => {
  it('a user message calls the model; its text is one message, then the loop completes; a kept key is not called again', () =>
    marbleTest((m) => {
      const { runes, states } = history([ask('m1', 1), { type: 'llm-message-started', messageId: 'llm-1', timestamp: 2 }]);
      const runes$ = m.hot<Rune>('-a-b', { a: runes[0]!, b: runes[1]! });
      const llm = m.cold<ChainOutput>('-x-y-(f|)', {
        x: text('Hello'),
        y: text(' there'),
        f: part({ type: 'finish', finishReason: 'stop', usage: { inputTokens: 7, outputTokens: 3 } }),
      });
      const { call, context, requests } = setup(m, runes$, states, [llm]);
      m.expectObservable(reactAgentLoop({ call, tools: [add], system: 'be kind' })(runes$, context, undefined)).toBe('--s---(co)', {
        // The message starts with the answer's first text.
        s: toAgent({ type: 'llm-message-started', messageId: 'llm-1', timestamp: 2 }),
        c: toAgent({ type: 'llm-message-completed', messageId: 'llm-1', content: 'Hello there', timestamp: 6 }),
        o: toAgent({
          type: 're-act-observed',
          calledLlmAt: 1,
          observation: { type: 'complete-re-act' },
          usage: used(1, { inputTokens: 7, outputTokens: 3 }),
          timestamp: 6,
        }),
      });
      // Subscribed once, at the user message; its own started rune kept the key.
      m.expectSubscriptions(llm.subscriptions).toBe('-^----!');
      return () => {
        expect(requests).toHaveLength(1);
        expect(requests[0]).toMatchObject({ system: 'be kind', messages: [{ role: 'user', content: 'hi' }] });
        expect(Object.keys(requests[0]!.tools)).toEqual(['add', 'load_older_messages', 'query_tool_calls', 'load_tool_call_results']);
      };
    }));

  it('internal tools are answered inside the call: the model is asked again with the loaded tool call and the query, and nothing enters the history', () =>
    marbleTest((m) => {
      // An earlier loop called `add` (t1); a new question opens a loop without it.
      const done = history([
        ask('m1', 1),
        {
          type: 're-act-observed',
          calledLlmAt: 1,
          observation: { type: 'continue-re-act', toolCalls: { t1: { name: 'add', parameters: '{"a":1,"b":2}', calledAt: 2 } } },
          timestamp: 2,
        },
        { type: 'tool-call-completed', toolCallId: 't1', result: { isSuccess: true, content: '3', receivedAt: 3 }, timestamp: 3 },
        { type: 're-act-observed', calledLlmAt: 3, observation: { type: 'complete-re-act' }, timestamp: 4 },
      ]).state;
      const { runes, states } = history([ask('m2', 10, 'what did you add?')], REACT, done);
      const runes$ = m.hot<Rune>('-a', { a: runes[0]! });
      const first = m.cold<ChainOutput>('-(qlf|)', {
        q: toolCall('i1', 'query_tool_calls', { name: 'add' }),
        l: toolCall('i2', 'load_tool_call_results', { toolCallIds: ['t1'] }),
        f: finish,
      });
      const second = m.cold<ChainOutput>('----(xf|)', { x: text('I added 1 and 2.'), f: finish });
      const { call, context, requests } = setup(m, runes$, states, [first, second]);
      // The first round is recorded, with its usage, before the model is asked again; the observation has the second's.
      m.expectObservable(reactAgentLoop({ call, tools: [add] })(runes$, context, undefined)).toBe('--(hr)(sco)', {
        h: toAgent({ type: 'history-tool-calls-added', toolCallIds: ['t1'], timestamp: 2 }),
        r: toAgent({ type: 'llm-round-answered', calledLlmAt: 10, usage: used(1), timestamp: 2 }),
        s: toAgent({ type: 'llm-message-started', messageId: 'llm-10', timestamp: 6 }),
        c: toAgent({ type: 'llm-message-completed', messageId: 'llm-10', content: 'I added 1 and 2.', timestamp: 6 }),
        o: toAgent({ type: 're-act-observed', calledLlmAt: 10, observation: { type: 'complete-re-act' }, usage: used(1), timestamp: 6 }),
      });
      m.expectSubscriptions(first.subscriptions).toBe('-^!');
      m.expectSubscriptions(second.subscriptions).toBe('--^---!');
      return () => {
        const again = requests[1]!.messages;
        // The loaded call is a standard round of the context; the internal calls are this call's round only.
        expect(again.map((message) => message.role)).toEqual(['user', 'assistant', 'tool', 'user', 'assistant', 'tool']);
        const internal = again.at(-1)!.content as { toolName: string; output: { type: string; value: string } }[];
        expect(internal.map((r) => r.toolName)).toEqual(['query_tool_calls', 'load_tool_call_results']);
        expect(JSON.parse(internal[0]!.output.value)).toEqual([{ toolCallId: 't1', name: 'add', parameters: '{"a":1,"b":2}', calledAt: 2, status: 'success' }]);
        expect(internal[1]!.output).toEqual({ type: 'text', value: 'Loaded 1 tool call(s) with their results into your context.' });
      };
    }));

  it('an internal tool the agent refuses (nothing older to load) answers with the reason, and the model goes on', () =>
    marbleTest((m) => {
      const { runes, states } = history([ask('m1', 1)]);
      const runes$ = m.hot<Rune>('-a', { a: runes[0]! });
      const first = m.cold<ChainOutput>('-(if|)', { i: toolCall('i1', 'load_older_messages', {}), f: finish });
      const second = m.cold<ChainOutput>('-(xf|)', { x: text('Nothing older.'), f: finish });
      const { call, context, requests } = setup(m, runes$, states, [first, second]);
      m.expectObservable(reactAgentLoop({ call, tools: [] })(runes$, context, undefined)).toBe('--r(sco)', {
        r: toAgent({ type: 'llm-round-answered', calledLlmAt: 1, usage: used(1), timestamp: 2 }),
        s: toAgent({ type: 'llm-message-started', messageId: 'llm-1', timestamp: 3 }),
        c: toAgent({ type: 'llm-message-completed', messageId: 'llm-1', content: 'Nothing older.', timestamp: 3 }),
        o: toAgent({ type: 're-act-observed', calledLlmAt: 1, observation: { type: 'complete-re-act' }, usage: used(1), timestamp: 3 }),
      });
      return () =>
        expect(requests[1]!.messages.at(-1)!.content).toEqual([
          expect.objectContaining({ toolName: 'load_older_messages', output: { type: 'error-text', value: 'the context window (10) already covers all 1 messages' } }),
        ]);
    }));

  it(`after ${MAX_INTERNAL_ROUNDS} internal rounds the model is asked without them; an internal name asked then is an external call, and fails saying so`, () =>
    marbleTest((m) => {
      const { runes, states } = history([ask('m1', 1)]);
      const runes$ = m.hot<Rune>('-a', { a: runes[0]! });
      const query = () => m.cold<ChainOutput>('(qf|)', { q: toolCall('i', 'query_tool_calls', {}), f: finish });
      const answers = [
        ...Array.from({ length: MAX_INTERNAL_ROUNDS }, query),
        m.cold<ChainOutput>('(qrf|)', { q: toolCall('x1', 'query_tool_calls', {}), r: toolCall('x2', 'rm', {}), f: finish }),
      ];
      const { call, context, requests } = setup(m, runes$, states, answers);
      const out: unknown[] = [];
      reactAgentLoop({ call, tools: [add] })(runes$, context, undefined).subscribe((command) => out.push(command));
      return () => {
        expect(requests.map((r) => Object.keys(r.tools).length)).toEqual([...Array.from({ length: MAX_INTERNAL_ROUNDS }, () => 4), 1]);
        expect(out.at(-1)).toMatchObject(
          toAgent({
            type: 're-act-observed',
            observation: { type: 'continue-re-act', toolCalls: { x1: { name: 'query_tool_calls', parameters: '{}' }, x2: { name: 'rm', parameters: '{}' } } },
          }),
        );
      };
    }));

  it('a tool call of the history is claimed, then runs once its claim is heard; an unknown tool and an internal-only name get failed results naming them, unclaimed', () =>
    marbleTest((m) => {
      const observed: AgentInput = {
        type: 're-act-observed',
        calledLlmAt: 1,
        observation: {
          type: 'continue-re-act',
          toolCalls: {
            t1: { name: 'add', parameters: '{"a":2,"b":3}', calledAt: 2 },
            t2: { name: 'rm', parameters: '{}', calledAt: 2 },
            t3: { name: 'load_older_messages', parameters: '{}', calledAt: 2 },
          },
        },
        timestamp: 2,
      };
      const { runes, states } = history([ask('m1', 1), observed, { type: 'tool-call-claimed', toolCallId: 't1', claim: 'run-1', timestamp: 3 }]);
      const runes$ = m.hot<Rune>('--b-----c', { b: runes[1]!, c: runes[2]! });
      const { call, context } = setup(m, runes$, states, []);
      // A run's result says the tool; a call that could not run is answered by the loop.
      const result = (toolCallId: string, r: Record<string, unknown>, by = r.isSuccess === true ? { by: 'tool' as const } : {}) =>
        toAgent({ type: 'tool-call-completed', toolCallId, result: { ...r, receivedAt: expect.any(Number) }, timestamp: expect.any(Number) }, by);
      m.expectObservable(reactAgentLoop({ call, tools: [add], claimId: () => 'run-1' })(runes$, context, undefined)).toBe('--(kbc)-a', {
        k: toAgent({ type: 'tool-call-claimed', toolCallId: 't1', claim: 'run-1', timestamp: 2 }),
        a: result('t1', { isSuccess: true, content: '5' }),
        b: result('t2', { isSuccess: false, error: 'unknown tool "rm"; the known tools are: "add"' }),
        c: result('t3', {
          isSuccess: false,
          error: 'tool "load_older_messages" is internal to the agent: it answers inside a model call and is not a tool call of the history',
        }),
      });
    }));

  it("a tool call whose first claim heard is another runner's never starts its tool, and emits nothing more", () =>
    marbleTest((m) => {
      let runs = 0;
      const counted = defineTool({ name: 'counted', description: 'Counts its runs', inputSchema: z.object({}), execute: () => ++runs });
      const observed: AgentInput = {
        type: 're-act-observed',
        calledLlmAt: 1,
        observation: { type: 'continue-re-act', toolCalls: { t1: { name: 'counted', parameters: '{}', calledAt: 2 } } },
        timestamp: 2,
      };
      const { runes, states } = history([ask('m1', 1), observed, { type: 'tool-call-claimed', toolCallId: 't1', claim: 'other', timestamp: 3 }]);
      const runes$ = m.hot<Rune>('--b-c', { b: runes[1]!, c: runes[2]! });
      const { call, context } = setup(m, runes$, states, []);
      m.expectObservable(reactAgentLoop({ call, tools: [counted], claimId: () => 'mine' })(runes$, context, undefined)).toBe('--k', {
        k: toAgent({ type: 'tool-call-claimed', toolCallId: 't1', claim: 'mine', timestamp: 2 }),
      });
      return () => expect(runs).toBe(0);
    }));

  it('a claim id the machine would refuse fails the call, naming it; the tool does not run', () =>
    marbleTest((m) => {
      const observed: AgentInput = {
        type: 're-act-observed',
        calledLlmAt: 1,
        observation: { type: 'continue-re-act', toolCalls: { t1: { name: 'add', parameters: '{"a":2,"b":3}', calledAt: 2 } } },
        timestamp: 2,
      };
      const { runes, states } = history([ask('m1', 1), observed]);
      const runes$ = m.hot<Rune>('--b', { b: runes[1]! });
      const { call, context } = setup(m, runes$, states, []);
      m.expectObservable(reactAgentLoop({ call, tools: [add], claimId: () => '' })(runes$, context, undefined)).toBe('--e', {
        e: toAgent(
          {
            type: 'tool-call-completed',
            toolCallId: 't1',
            result: {
              isSuccess: false,
              error: expect.stringMatching(/^the tool runner failed: TypeError: "claimId" gave an id the machine refuses: .*at claim$/),
              receivedAt: 2,
            },
            timestamp: 2,
          },
          {},
        ),
      });
      expect(() => reactAgentLoop({ call, tools: [add], claimId: 'mine' as never })).toThrow(
        'reactAgentEpics: "claimId" must be a function giving a new claim id, got string',
      );
    }));

  it('an answer of tool calls only adds no message: no llm-message-started, only its observation with what it used', () =>
    marbleTest((m) => {
      const { runes, states } = history([ask('m1', 1)]);
      const runes$ = m.hot<Rune>('-a', { a: runes[0]! });
      const llm = m.cold<ChainOutput>('-(tf|)', { t: toolCall('t1', 'add', { a: 1, b: 2 }), f: finish });
      const { call, context } = setup(m, runes$, states, [llm]);
      m.expectObservable(reactAgentLoop({ call, tools: [add] })(runes$, context, undefined)).toBe('--o', {
        o: toAgent({
          type: 're-act-observed',
          calledLlmAt: 1,
          observation: { type: 'continue-re-act', toolCalls: { t1: { name: 'add', parameters: '{"a":1,"b":2}', calledAt: 2 } } },
          usage: { ...used(1), toolCalls: 1 },
          timestamp: 2,
        }),
      });
    }));

  it('a message left streaming by a call a newer input superseded is completed by the next call, not left streaming for ever', () =>
    marbleTest((m) => {
      // The call answering m1 started llm-1 and died; m2 came meanwhile, so the next call answers up to 3.
      const { runes, states } = history([ask('m1', 1), { type: 'llm-message-started', messageId: 'llm-1', timestamp: 2 }, ask('m2', 3)]);
      const runes$ = m.hot<Rune>('-a', { a: runes[2]! });
      const llm = m.cold<ChainOutput>('-(xf|)', { x: text('Both.'), f: finish });
      const { call, context } = setup(m, runes$, states, [llm]);
      m.expectObservable(reactAgentLoop({ call, tools: [] })(runes$, context, undefined)).toBe('--(co)', {
        c: toAgent({ type: 'llm-message-completed', messageId: 'llm-1', content: 'Both.', timestamp: 2 }),
        o: toAgent({ type: 're-act-observed', calledLlmAt: 3, observation: { type: 'complete-re-act' }, usage: used(1), timestamp: 2 }),
      });
    }));

  it('a model call that fails completes the message with what it streamed, ends the loop, and is reported', () =>
    marbleTest((m) => {
      const { runes, states } = history([ask('m1', 1)]);
      const runes$ = m.hot<Rune>('-a', { a: runes[0]! });
      const llm = m.cold<ChainOutput>('-x-#', { x: text('Partial') }, new Error('all providers failed'));
      const { call, context, reports } = setup(m, runes$, states, [llm]);
      m.expectObservable(reactAgentLoop({ call, tools: [] })(runes$, context, undefined)).toBe('--s-(co)', {
        s: toAgent({ type: 'llm-message-started', messageId: 'llm-1', timestamp: 2 }),
        c: toAgent({ type: 'llm-message-completed', messageId: 'llm-1', content: 'Partial', timestamp: 4 }),
        o: toAgent({ type: 're-act-observed', calledLlmAt: 1, observation: { type: 'complete-re-act' }, usage: used(0), timestamp: 4 }),
      });
      return () =>
        expect(reports).toMatchObject([{ type: 'effect_failed', epic: 'reactAgentLoop', stream: REACT, key: 'call-llm:0', error: { message: 'all providers failed' } }]);
    }));
});

describe('reactAgentLoop: after a restart (streams found in the store, hydrated)', () => {
  it('an LLM call in flight is made again into the message it started; a tool call in flight follows its claim (executionStart)', () =>
    marbleTest((m) => {
      const calls = (name: string): AgentInput => ({
        type: 're-act-observed',
        calledLlmAt: 1,
        observation: { type: 'continue-re-act', toolCalls: { t1: { name, parameters: '{}', calledAt: 2 } } },
        timestamp: 2,
      });
      const deadClaim: AgentInput = { type: 'tool-call-claimed', toolCallId: 't1', claim: 'dead', timestamp: 3 };
      const steadyLog = history([ask('m1', 1), calls('steady'), deadClaim], 'conv/c1/agent/steady/react');
      const freshLog = history([ask('m1', 1), calls('shaky')], 'conv/c1/agent/fresh/react');
      // The claims this process makes are heard back, as the engine would publish them.
      const reclaimed = history(
        [{ type: 'tool-call-claimed', toolCallId: 't1', claim: 'run-1', supersedes: 'dead', timestamp: 4 }],
        'conv/c1/agent/steady/react',
        steadyLog.state,
      );
      const claimedFresh = history([{ type: 'tool-call-claimed', toolCallId: 't1', claim: 'run-1', timestamp: 4 }], 'conv/c1/agent/fresh/react', freshLog.state);
      const stored: Record<string, AgentState> = {
        [REACT]: history([ask('m1', 1), { type: 'llm-message-started', messageId: 'llm-1', timestamp: 2 }]).state,
        'conv/c1/agent/shaky/react': history([ask('m1', 1), calls('shaky'), deadClaim]).state,
        'conv/c1/agent/steady/react': steadyLog.state,
        'conv/c1/agent/fresh/react': freshLog.state,
        'not-an-agent': history([ask('m1', 1)]).state, // outside the naming scheme: left alone
      };
      const head = (stream: string): StreamHead => ({ stream, machine: 'react-agent', seq: 3, at: 2 });
      const heard = (rune: Rune): Rune => ({ ...rune, seq: 4 });
      const runes$ = m.hot<Rune>('-------rf', { r: heard(reclaimed.runes[0]!), f: heard(claimedFresh.runes[0]!) });
      const llm = m.cold<ChainOutput>('----------(xf|)', { x: text('Back.'), f: finish });
      const { call, context, requests } = setup(m, runes$, new Map([...reclaimed.states, ...claimedFresh.states].map(([r, s]) => [heard(r), s])), [llm], {
        streams: () =>
          m.cold('-(abcde|)', {
            a: head(REACT),
            b: head('conv/c1/agent/shaky/react'),
            c: head('conv/c1/agent/steady/react'),
            d: head('conv/c1/agent/fresh/react'),
            e: head('not-an-agent'),
          }),
        snapshot: ((stream: string) => of({ stream, seq: 3, state: stored[stream] })) as never,
      });
      // A run's result says the tool; a call interrupted by the restart is answered by the loop.
      const completed = (stream: string, result: Record<string, unknown>, at: number) => ({
        stream,
        event: { type: 'tool-call-completed', toolCallId: 't1', result: { ...result, receivedAt: at }, timestamp: at },
        ...(result.isSuccess === true ? { by: 'tool' } : {}),
      });
      const claimed = (stream: string, supersedes?: string) => ({
        stream,
        event: { type: 'tool-call-claimed', toolCallId: 't1', claim: 'run-1', ...(supersedes === undefined ? {} : { supersedes }), timestamp: 1 },
      });
      m.expectObservable(reactAgentLoop({ call, tools: [shaky, steady], claimId: () => 'run-1' })(runes$, context, undefined)).toBe('-(abd)-mn--(co)', {
        // Claimed by the dead process and not rerunSafe: it may have run, so it is not run again.
        a: completed('conv/c1/agent/shaky/react', { isSuccess: false, error: 'interrupted by restart' }, 1),
        // Claimed and rerunSafe: claimed again, superseding the dead claim, and run once that claim is heard.
        b: claimed('conv/c1/agent/steady/react', 'dead'),
        m: completed('conv/c1/agent/steady/react', { isSuccess: true, content: 'ran' }, 7),
        // Never claimed: it never started, so even a tool that is not rerunSafe is claimed and runs.
        d: claimed('conv/c1/agent/fresh/react'),
        n: completed('conv/c1/agent/fresh/react', { isSuccess: true, content: 'ran' }, 8),
        // No second llm-message-started: the message the dead process started is completed.
        c: toAgent({ type: 'llm-message-completed', messageId: 'llm-1', content: 'Back.', timestamp: 11 }),
        o: toAgent({ type: 're-act-observed', calledLlmAt: 1, observation: { type: 'complete-re-act' }, usage: used(1), timestamp: 11 }),
      });
      return () => expect(requests).toHaveLength(1);
    }));

  it('a claimed call first heard under another rune (a user message before the listing reached it) is taken over, not left to a dead claim', () =>
    marbleTest((m) => {
      const stream = 'conv/c1/agent/shaky/react';
      const observed: AgentInput = {
        type: 're-act-observed',
        calledLlmAt: 1,
        observation: { type: 'continue-re-act', toolCalls: { t1: { name: 'shaky', parameters: '{}', calledAt: 2 } } },
        timestamp: 2,
      };
      const { runes, states } = history([ask('m1', 1), observed, { type: 'tool-call-claimed', toolCallId: 't1', claim: 'dead', timestamp: 3 }, ask('m2', 4)], stream);
      const runes$ = m.hot<Rune>('-u', { u: runes[3]! });
      const { call, context } = setup(m, runes$, states, []);
      m.expectObservable(reactAgentLoop({ call, tools: [shaky], claimId: () => 'run-1' })(runes$, context, undefined)).toBe('-i', {
        i: { stream, event: { type: 'tool-call-completed', toolCallId: 't1', result: { isSuccess: false, error: 'interrupted by restart', receivedAt: 1 }, timestamp: 1 } },
      });
    }));
});
