import { seedExampleInputs } from '../../fixtures/seed-004-inputs.js';
import { elementAt, filter, firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, reactAgentEpics, scriptedModel } from '../../../src/agents.js';
import {
  agentStreams,
  checkInvariants,
  createEngine,
  memoryStore,
  type AgentLifecycleState,
  type AgentState,
  type ConversationState,
  type EngineError,
} from '../../../src/index.js';

const add = defineTool({ name: 'add', description: 'Adds two numbers', inputSchema: z.object({ a: z.number(), b: z.number() }), execute: ({ a, b }) => a + b });

describe('reactAgentEpics: a ReAct agent on the engine', () => {
  it('answers through a tool; a call to an unknown tool gets a failed result naming it, and the agent goes on', async () => {
    const model = scriptedModel([
      {
        toolCalls: [
          { toolName: 'add', input: { a: 1, b: 2 }, toolCallId: 't1' },
          { toolName: 'rm', input: { path: '/' }, toolCallId: 't2' },
        ],
      },
      { text: 'It is 3.' },
    ]);
    const engine = createEngine({ epics: reactAgentEpics({ model, tools: [add], system: 'You add.' }) });
    const errors: EngineError[] = [];
    engine.errors$.subscribe((error) => errors.push(error));
    const stream = agentStreams('conv/c1', 'a1').react;
    await engine.spawn(stream, 'react-agent');
    const done = firstValueFrom(engine.state$<AgentState>(stream).pipe(filter((s) => s.reActContext === null && s.messages.some((m) => m.content === 'It is 3.'))));
    await engine.dispatch(stream, { type: 'user-message-received', messageId: 'm1', content: 'what is 1 + 2?', timestamp: 1 });
    const state = await done;
    // The answer of tool calls only adds no message: the history is the question and the answer.
    expect(state.messages.map((m) => m.content)).toEqual(['what is 1 + 2?', 'It is 3.']);
    expect(state.toolCalls.t1?.result).toMatchObject({ isSuccess: true, content: '3' });
    expect(state.toolCalls.t2?.result).toMatchObject({ isSuccess: false, error: 'unknown tool "rm"; the known tools are: "add"' });
    expect(model.doStreamCalls).toHaveLength(2);
    expect(model.doStreamCalls[1]!.prompt.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'tool']);
    expect(errors).toEqual([]);
    await engine.close();
  });

  it("keeps all five inputs of the seed's example, each stamped with one Date.now()", async () => {
    const engine = createEngine({ epics: reactAgentEpics({ model: scriptedModel([]) }) });
    const stream = 'seed-004-example'; // outside conv/<c>/agent/<a>/react: no effects, only the machine
    await engine.spawn(stream, 'react-agent');
    const now = Date.now();
    const inputs = seedExampleInputs(now);
    const results = [];
    for (const input of inputs) results.push(await engine.dispatch(stream, input));
    expect(results.map((r) => r.accepted)).toEqual([true, true, true, true, true]);
    const state = (await engine.snapshot<AgentState>(stream))!.state;
    expect(state.updatedAt).toBe(now + 4);
    expect(state.toolCalls['tool-1']?.result).toMatchObject({ isSuccess: true, receivedAt: now + 4 });
    await engine.close();
  });

  it('has the companions of a turn-based agent: its lifecycle and conversation, each ReAct loop a turn of both', async () => {
    const store = memoryStore();
    const engine = createEngine({ store, epics: reactAgentEpics({ model: scriptedModel([{ text: 'Hello!' }, { text: 'Again.' }]) }) });
    const agent = agentStreams('conv/c1', 'a1');
    const ready = firstValueFrom(engine.runes$().pipe(filter((r) => r.stream === agent.lifecycle && r.kind === 'agent.ready')));
    await engine.spawn(agent.react, 'react-agent');
    await ready;
    expect((await engine.snapshot<AgentLifecycleState>(agent.lifecycle))?.state).toMatchObject({ value: 'idle', agentId: 'a1' });
    expect((await engine.snapshot<ConversationState>(agent.root))?.state).toMatchObject({ value: 'active', rootAgentId: 'a1' });

    for (const [n, content] of [
      [1, 'Hi'],
      [2, 'Hi again'],
    ] as const) {
      const rested = firstValueFrom(engine.state$<AgentState>(agent.react).pipe(filter((s) => s.reActContext === null && s.messages.length === 2 * n)));
      await engine.dispatch(agent.react, { type: 'user-message-received', messageId: `m${n}`, content, timestamp: n });
      await rested;
      // The agent's nth turn ended, and it counted what it used (and so did the conversation: its usage is its agents').
      await firstValueFrom(
        engine.runes$(agent.lifecycle).pipe(
          filter((r) => r.kind === 'turn.completed'),
          elementAt(n - 1),
        ),
      );
      await firstValueFrom(engine.state$<AgentLifecycleState>(agent.lifecycle).pipe(filter((s) => s.usage.modelCalls === n)));
    }
    const lifecycle = await store.read(agent.lifecycle);
    expect(lifecycle.map((r) => r.kind)).toEqual(['agent.spawning', 'agent.ready', 'turn.started', 'turn.completed', 'turn.started', 'turn.completed']);
    const all = (await Promise.all([agent.root, agent.lifecycle, agent.react].map((s) => store.read(s)))).flat();
    expect(checkInvariants(all)).toEqual([]);
    await engine.close();
  });

  it('refuses an external tool named like an internal one', () => {
    const clash = defineTool({ name: 'load_older_messages', description: 'x', inputSchema: z.object({}), execute: () => '' });
    expect(() => reactAgentEpics({ model: scriptedModel([]), tools: [clash] })).toThrow(
      'reactAgentEpics: tool name "load_older_messages" is taken by an internal tool of the ReAct agent; rename the tool',
    );
  });
});
