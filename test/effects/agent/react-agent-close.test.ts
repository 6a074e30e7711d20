import { VirtualTimeScheduler } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentEpics, defineTool, reactAgentEpics, scriptedModel, type ScriptStep } from '../../../src/agents.js';
import { agentStreams, atRest, createEngine, memoryStore, type AgentLifecycleState, type AgentState, type ConversationState, type Engine } from '../../../src/index.js';
import { watchEngine } from '../../support/watched-engine.js';

/**
 * Closing a conversation with a ReAct loop still working in it (issue 28, close-leaves-work-open;
 * the simulation's seeds 113 and 216): the close ends the loop before it seals the conversation,
 * so no loop is left calling its model or running a tool that can never report. An engine with
 * both kinds of epics (the close is `agentEpics`'), in virtual time.
 */

const agent = agentStreams('conv/c1', 'r1');
const engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
});

/** A tool that never finishes: it ends only when its call is stopped. */
const forever = defineTool({ name: 'forever', description: 'Never done.', inputSchema: z.object({}), execute: () => new Promise<string>(() => undefined) });

function start(script: readonly ScriptStep[]) {
  const scheduler = new VirtualTimeScheduler();
  const model = scriptedModel(script, { whenExhausted: 'cycle' });
  const engine = createEngine({
    store: memoryStore(),
    scheduler,
    epics: [...agentEpics({ model, tools: [forever] }), ...reactAgentEpics({ model, tools: [forever], breakers: false })],
  });
  engines.push(engine);
  return { engine, ...watchEngine(engine, scheduler) };
}

/** Asks the agent, waits for `working` to hold, closes the conversation and waits for it to be closed. */
async function closeWhile(script: readonly ScriptStep[], working: (state: AgentState) => boolean) {
  const world = start(script);
  const { engine, until, state } = world;
  await engine.spawn(agent.react, 'react-agent');
  expect(await until(() => state<AgentLifecycleState>(agent.lifecycle)?.value === 'idle')).toBe(true);
  await engine.dispatch(agent.react, { type: 'user-message-received', messageId: 'm1', content: 'Go', timestamp: 1000 });
  expect(await until(() => state<AgentState>(agent.react) !== undefined && working(state<AgentState>(agent.react)!))).toBe(true);
  expect(await engine.dispatch(agent.root, { type: 'close_requested', reason: 'user' })).toMatchObject({ accepted: true });
  expect(await until(() => state<ConversationState>(agent.root)?.value === 'closed')).toBe(true);
  return world;
}

describe('closing a conversation with a ReAct loop working in it', () => {
  it('a model call in flight: the loop ends, its message completed, before the conversation is sealed', async () => {
    const { state, runes, errors } = await closeWhile([{ text: 'Partial answer', hang: true, afterDeltas: 1 }], (s) =>
      s.messages.some((m) => m.role === 'assistant' && m.streaming),
    );
    const loop = state<AgentState>(agent.react)!;
    expect(atRest('react-agent', loop), `the loop left working: ${JSON.stringify(loop.messages)}`).toBeDefined();
    expect(loop.reActContext).toBeNull();
    const ended = runes.find((rune) => rune.stream === agent.react && rune.event.type === 're-act-observed');
    expect(ended?.event).toMatchObject({ observation: { type: 'complete-re-act', reason: 'conversation closing' } });
    expect(state<AgentLifecycleState>(agent.lifecycle)?.value).toBe('terminated');
    expect(errors).toEqual([]); // nothing refused: no command of the close, of the loop or of its call
    // The loop's turn ended before the seal: the agent's every turn started ended (each counted in its usage, the conversation's).
    const lifecycle = runes.filter((rune) => rune.stream === agent.lifecycle).map((rune) => rune.event.type);
    const ends = lifecycle.filter((type) => type === 'turn_completed' || type === 'turn_interrupted' || type === 'turn_error').length;
    expect(ends).toBeGreaterThan(0);
    expect(lifecycle.filter((type) => type === 'turn_assigned')).toHaveLength(ends);
  });

  it('a tool call in flight: it fails "cancelled: conversation closing", the loop ends without calling the model again', async () => {
    const { state, errors } = await closeWhile([{ toolCalls: [{ toolCallId: 't1', toolName: 'forever', input: {} }] }], (s) => s.toolCalls.t1 !== undefined);
    const loop = state<AgentState>(agent.react)!;
    expect(atRest('react-agent', loop), `the loop left working: ${JSON.stringify(loop.toolCalls)}`).toBeDefined();
    expect(loop.toolCalls.t1?.result).toMatchObject({ isSuccess: false, error: 'cancelled: conversation closing' });
    expect(loop.messages.filter((m) => m.role === 'assistant')).toEqual([]);
    expect(state<AgentLifecycleState>(agent.lifecycle)?.value).toBe('terminated');
    expect(errors).toEqual([]); // nothing refused: no command of the close, of the loop or of its call
  });
});
