import { filter, firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { reactAgentRuntime } from '../../../src/effects/agent/react-agent-runtime.js';
import { scriptedModel } from '../../../src/effects/llm/scripted-model.js';
import { defineTool } from '../../../src/effects/tools/tool.js';

const add = defineTool({
  name: 'add',
  description: 'Adds two numbers',
  inputSchema: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});

describe('reactAgentRuntime: seed 004 ReAct agent on createMoorex, with the same models and tools', () => {
  it('answers a message through a tool call: the LLM asks, the tool runs, the LLM answers with the result', async () => {
    const model = scriptedModel([{ toolCalls: [{ toolName: 'add', input: { a: 1, b: 2 }, toolCallId: 't1' }] }, { text: 'It is 3.' }]);
    const agent = reactAgentRuntime({ model, tools: [add], system: 'You add.' });
    const done = firstValueFrom(agent.state$.pipe(filter((s) => s.messages.some((m) => m.role === 'assistant' && m.content === 'It is 3.') && s.reActContext === null)));
    agent.say('what is 1 + 2?');
    const state = await done;
    agent.close();

    expect(state.toolCalls.t1).toMatchObject({ name: 'add', parameters: '{"a":1,"b":2}', result: { isSuccess: true, content: '3' } });
    expect(model.doStreamCalls).toHaveLength(2);
    // The second call sees the tool call and its result.
    const prompt = model.doStreamCalls[1]!.prompt;
    expect(prompt.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    expect(JSON.stringify(prompt[3])).toContain('"toolCallId":"t1"');
  });

  it('an unknown tool gets a failed result naming it, and the loop goes on', async () => {
    const model = scriptedModel([{ toolCalls: [{ toolName: 'rm', input: {}, toolCallId: 't1' }] }, { text: 'Sorry.' }]);
    const agent = reactAgentRuntime({ model, tools: [add] });
    const done = firstValueFrom(agent.state$.pipe(filter((s) => s.reActContext === null && s.messages.length > 1)));
    agent.say('delete everything');
    const state = await done;
    agent.close();
    expect(state.toolCalls.t1?.result).toMatchObject({ isSuccess: false, error: 'unknown tool "rm"; the known tools are: "add"' });
  });
});
