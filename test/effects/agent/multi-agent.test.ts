import { filter, firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, scriptedModel } from '../../../src/agents.js';
import { subAgentId } from '../../../src/effects/agent/delegation.js';
import {
  agentStreams,
  checkInvariants,
  createEngine,
  memoryStore,
  type AgentLifecycleState,
  type ConversationState,
  type Engine,
  type ToolCallState,
  type TurnEngineState,
} from '../../../src/index.js';
import { storeLog } from '../../support/store-log.js';

const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

const ROOT = agentStreams('conv/c1', 'root');
const delegateCall = (role: string, task: string, toolCallId: string) => ({ toolName: 'delegate', input: { role, task }, toolCallId });
const idleAfter = (engine: Engine, stream: string, turn: number) =>
  firstValueFrom(engine.state$<TurnEngineState>(stream).pipe(filter((s) => s.value === 'idle' && s.turn === turn)));

/** An engine on a memory store whose root agent (role `lead`) is spawned with its role, then its turn. */
async function conversationOf(options: Parameters<typeof agentEpics>[0], rootRole = 'lead'): Promise<{ engine: Engine; store: ReturnType<typeof memoryStore> }> {
  const store = memoryStore();
  const engine = createEngine({ store, epics: agentEpics(options) });
  engines.push(engine);
  await engine.spawn(ROOT.lifecycle, 'agent-lifecycle', { agentId: 'root', role: rootRole });
  await engine.spawn(ROOT.turn, 'turn-engine');
  return { engine, store };
}

describe('agentEpics with roles: a conversation of several agents', () => {
  it('a root delegates to two sub-agents of a role, side by side; each result is the sub-agent final output', async () => {
    const lead = scriptedModel([
      { text: 'Asking two.', toolCalls: [delegateCall('researcher', 'find A', 'd1'), delegateCall('researcher', 'find B', 'd2')] },
      { text: 'Both found.' },
    ]);
    const researcher = scriptedModel([
      (call) => ({ text: JSON.stringify(call.prompt).includes('find A') ? 'A is 1' : 'B is 2' }),
      (call) => ({ text: JSON.stringify(call.prompt).includes('find A') ? 'A is 1' : 'B is 2' }),
    ]);
    const { engine, store } = await conversationOf({
      model: lead,
      agents: { lead: { system: 'You lead.' }, researcher: { model: researcher, system: 'You research.', description: 'finds facts' } },
    });
    await engine.dispatch(ROOT.turn, { type: 'start_turn', input: 'find A and B' });
    await idleAfter(engine, ROOT.turn, 1);

    expect((await engine.snapshot<ToolCallState>(ROOT.call('d1')))?.state).toMatchObject({ value: 'completed_result', output: 'A is 1' });
    expect((await engine.snapshot<ToolCallState>(ROOT.call('d2')))?.state).toMatchObject({ value: 'completed_result', output: 'B is 2' });
    const sub = agentStreams('conv/c1', subAgentId('root', 'd1'));
    expect((await engine.snapshot<AgentLifecycleState>(sub.lifecycle))?.state).toMatchObject({ value: 'idle', role: 'researcher', parentId: 'root', model: 'scripted-model' });
    expect((await engine.snapshot<TurnEngineState>(ROOT.turn))?.state.output).toBe('Asking two.Both found.');
    // The lead saw the delegate tool, describing the roles; the researcher got its own system prompt.
    expect(lead.doStreamCalls[0]!.tools?.map((tool) => tool.name)).toEqual(['delegate']);
    expect(JSON.stringify(lead.doStreamCalls[0]!.tools)).toContain('researcher (finds facts)');
    expect(JSON.stringify(researcher.doStreamCalls[0]!.prompt)).toContain('You research.');
    expect(JSON.stringify(lead.doStreamCalls[1]!.prompt)).toContain('A is 1');
    expect((await engine.snapshot<ConversationState>('conv/c1'))?.state).toMatchObject({ value: 'active', rootAgentId: 'root' });
    // Its usage is its agents': the lead's two calls and each researcher's one.
    const agents = await Promise.all(['root', 'root.d1', 'root.d2'].map((id) => engine.snapshot<AgentLifecycleState>(agentStreams('conv/c1', id).lifecycle)));
    expect(agents.map((agent) => agent?.state.usage.modelCalls)).toEqual([2, 1, 1]);
    expect(checkInvariants(await storeLog(store))).toEqual([]);
  });

  it('closing while a sub-agent runs a tool that waits: turns interrupted, calls cancelled, agents terminated with stats, then sealed', async () => {
    let aborted = '';
    const wait = defineTool({
      name: 'wait',
      description: 'Waits until cancelled.',
      inputSchema: z.object({}),
      execute: (_, { signal }) =>
        new Promise((_resolve, reject) =>
          signal.addEventListener('abort', () => {
            aborted = String(signal.reason);
            reject(new Error('aborted'));
          }),
        ),
    });
    const lead = scriptedModel([{ toolCalls: [delegateCall('worker', 'wait for it', 'd1')] }]);
    const worker = scriptedModel([{ text: 'Waiting.', toolCalls: [{ toolName: 'wait', input: {}, toolCallId: 'w1' }] }]);
    const { engine, store } = await conversationOf({ model: lead, agents: { lead: {}, worker: { model: worker, tools: [wait] } } });
    const sub = agentStreams('conv/c1', subAgentId('root', 'd1'));
    const running = firstValueFrom(engine.runes$().pipe(filter((rune) => rune.stream === sub.call('w1') && rune.to === 'executing')));
    await engine.dispatch(ROOT.turn, { type: 'start_turn', input: 'go' });
    await running;

    const closed = firstValueFrom(engine.state$<ConversationState>('conv/c1').pipe(filter((s) => s.value === 'closed')));
    await engine.dispatch('conv/c1', { type: 'close_requested', reason: 'user left' });
    const { finalStats } = await closed;
    // Usage counts the interrupted turns too (their wall clock is real time here).
    expect(finalStats).toEqual({
      agents: 2,
      turns: 2,
      toolCalls: 2,
      cancelledToolCalls: 2,
      usage: expect.objectContaining({ inputTokens: 0, outputTokens: 3, modelCalls: 2, toolCalls: 2 }),
    });
    expect(aborted).toContain('conversation closing');
    expect((await engine.snapshot<ToolCallState>(ROOT.call('d1')))?.state.value).toBe('cancelled_result');
    expect((await engine.snapshot<ToolCallState>(sub.call('w1')))?.state.value).toBe('cancelled_result');
    for (const agent of [ROOT, sub]) {
      expect((await engine.snapshot<AgentLifecycleState>(agent.lifecycle))?.state).toMatchObject({ value: 'terminated', terminatedBy: 'parent_closed' });
      expect((await engine.snapshot<TurnEngineState>(agent.turn))?.state.value).toBe('idle');
    }
    expect((await engine.snapshot<AgentLifecycleState>(sub.lifecycle))?.state.stats).toEqual({ turns: 1, toolCalls: 1 });
    expect(await engine.dispatch(ROOT.turn, { type: 'start_turn', input: 'more?' })).toEqual({
      accepted: false,
      code: 'sealed',
      reason: `stream "${ROOT.turn}" is sealed: conversation "conv/c1" is closed`,
    });
    expect(checkInvariants(await storeLog(store))).toEqual([]);
  });

  it('refuses a delegation beyond maxDepth or maxAgents with an error result naming the limit, and the parent turn goes on', async () => {
    // The lead delegates to a worker, which delegates again (depth 2, over maxDepth 1); then the lead delegates once more (a third agent, over maxAgents 2).
    const lead = scriptedModel([{ toolCalls: [delegateCall('worker', 'nest', 'd1')] }, { toolCalls: [delegateCall('worker', 'again', 'd2')] }, { text: 'Done.' }]);
    const worker = scriptedModel([{ toolCalls: [delegateCall('worker', 'deeper', 'x1')] }, { text: 'Could not nest.' }]);
    const { engine } = await conversationOf({ model: lead, agents: { lead: {}, worker: { model: worker } }, delegation: { maxDepth: 1, maxAgents: 2 } });
    await engine.dispatch(ROOT.turn, { type: 'start_turn', input: 'go' });
    await idleAfter(engine, ROOT.turn, 1);
    const sub = agentStreams('conv/c1', subAgentId('root', 'd1'));
    expect((await engine.snapshot<ToolCallState>(sub.call('x1')))?.state).toMatchObject({
      value: 'error_result',
      error: 'delegate: a sub-agent of "root.d1" would be at depth 2, over delegation.maxDepth (1)',
    });
    expect((await engine.snapshot<ToolCallState>(ROOT.call('d1')))?.state).toMatchObject({ value: 'completed_result', output: 'Could not nest.' });
    expect((await engine.snapshot<ToolCallState>(ROOT.call('d2')))?.state).toMatchObject({
      value: 'error_result',
      error: 'delegate: the conversation has 2 agents, delegation.maxAgents (2)',
    });
    expect((await engine.snapshot<TurnEngineState>(ROOT.turn))?.state.output).toBe('Done.');
  });

  it("runs only the calling agent's role's tools: a call to another role's tool ends in an error result naming the tool and the role, unrun and unapproved", async () => {
    const runs: string[] = [];
    const tool = (name: string, needsApproval = false) =>
      defineTool({ name, description: `The ${name} tool.`, inputSchema: z.object({}), needsApproval, execute: () => (runs.push(name), `${name} done`) });
    const [draft, search] = [tool('draft'), tool('search', true)];
    const lead = scriptedModel([
      {
        toolCalls: [
          { toolName: 'search', input: {}, toolCallId: 's1' },
          { toolName: 'draft', input: {}, toolCallId: 'w1' },
        ],
      },
      { text: 'Drafted without searching.' },
    ]);
    const { engine, store } = await conversationOf({ model: lead, agents: { lead: { tools: [draft] }, researcher: { tools: [search] } } });
    await engine.dispatch(ROOT.turn, { type: 'start_turn', input: 'go' });
    await idleAfter(engine, ROOT.turn, 1);

    expect(lead.doStreamCalls[0]!.tools?.map((spec) => spec.name)).toEqual(['draft', 'delegate']);
    const searchCall = (await storeLog(store)).filter((rune) => rune.stream === ROOT.call('s1'));
    // No approval asked for a call that is not the agent's to make: straight to its error.
    expect(searchCall.map((rune) => rune.to)).toEqual(['pending_call', 'executing', 'error_result']);
    expect(searchCall.at(-1)?.event).toEqual({ type: 'execution_error', error: 'tool "search" is not a tool of role "lead"; its tools are: "draft", "delegate"' });
    expect((await engine.snapshot<ToolCallState>(ROOT.call('w1')))?.state).toMatchObject({ value: 'completed_result', output: 'draft done' });
    expect(runs).toEqual(['draft']);
    expect(JSON.stringify(lead.doStreamCalls[1]!.prompt)).toContain('is not a tool of role \\"lead\\"');
    expect((await engine.snapshot<TurnEngineState>(ROOT.turn))?.state.output).toBe('Drafted without searching.');
    expect(checkInvariants(await storeLog(store))).toEqual([]);
  });

  it('answers a call to an unknown tool, or to a ReAct internal tool, with an error result naming it; an unknown role fails init', async () => {
    const lead = scriptedModel([
      {
        toolCalls: [{ toolName: 'rm_rf', input: {}, toolCallId: 'u1' }, { toolName: 'load_older_messages', input: {}, toolCallId: 'u2' }, delegateCall('ghost', 'boo', 'u3')],
      },
      { text: 'Sorry.' },
    ]);
    const { engine } = await conversationOf({ model: lead, agents: { lead: {} } });
    await engine.dispatch(ROOT.turn, { type: 'start_turn', input: 'go' });
    await idleAfter(engine, ROOT.turn, 1);
    expect((await engine.snapshot<ToolCallState>(ROOT.call('u1')))?.state).toMatchObject({ value: 'error_result', error: expect.stringContaining('"rm_rf"') });
    expect((await engine.snapshot<ToolCallState>(ROOT.call('u2')))?.state).toMatchObject({ value: 'error_result', error: expect.stringContaining('"load_older_messages"') });
    expect((await engine.snapshot<ToolCallState>(ROOT.call('u3')))?.state).toMatchObject({ value: 'error_result', error: expect.stringContaining('ghost') });

    const other = agentStreams('conv/c1', 'stranger');
    await engine.spawn(other.lifecycle, 'agent-lifecycle', { agentId: 'stranger', role: 'spy' });
    const failed = firstValueFrom(engine.state$<AgentLifecycleState>(other.lifecycle).pipe(filter((s) => s.value === 'failed')));
    await engine.spawn(other.turn, 'turn-engine');
    expect((await failed).error).toBe('no agent profile for role "spy"; the roles are lead');
  });
});
