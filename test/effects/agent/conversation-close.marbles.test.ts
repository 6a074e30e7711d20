import { describe, expect, it } from 'vitest';
import { agentStreams, planStream, type AutonomyLoopState, type EpicCommand } from '../../../src/index.js';
import { CONVERSATION_CLOSING, conversationClose } from '../../../src/effects/agent/conversation-close.js';
import { applyAll, machineWorld, playEpic } from '../../support/frames.js';

/**
 * The `conversationClose` epic alone, in virtual time: a log in memory played by the real machines
 * (`machineWorld`) stands for the store, the test does what `agentTurns` would (ending a turn
 * that was interrupted), and the epic's own commands are applied before their runes are heard. Its steps await the conversation's heads, so each frame is a rune sent and the commands
 * it led to once they settled (marbles cannot hold Promises).
 */

const ROOT = 'conv/c1';
const root = agentStreams(ROOT, 'root');
const sub = agentStreams(ROOT, 'root.d1');
const idle = agentStreams(ROOT, 'idle1');
const interrupt = (stream: string): EpicCommand => ({ stream, event: { type: 'interrupt', reason: CONVERSATION_CLOSING } });
const terminate = (stream: string, turns: number, toolCalls: number): EpicCommand => ({ stream, event: { type: 'parent_closed', stats: { turns, toolCalls } } });

/**
 * A conversation mid-work: `root` in a tool round, its delegate call `d1` executing; the
 * sub-agent `root.d1` (parentId root) streaming its turn; `idle1` idle, no turn yet.
 */
function busyConversation() {
  const w = machineWorld();
  w.spawn(ROOT, 'conversation', { conversationId: 'c1' });
  w.dispatch(ROOT, { type: 'agent_ready', rootAgentId: 'root' });
  for (const [agent, parentId] of [
    [root, undefined],
    [sub, 'root'],
    [idle, undefined],
  ] as const) {
    w.spawn(agent.lifecycle, 'agent-lifecycle', { agentId: agent.agentId, ...(parentId === undefined ? {} : { parentId }) });
    w.dispatch(agent.lifecycle, { type: 'init_complete' });
  }
  const call = { callId: 'd1', toolName: 'delegate', arguments: { role: 'researcher', task: 'look' } };
  for (const agent of [root, sub]) {
    w.spawn(agent.turn, 'turn-engine', { agentId: agent.agentId });
    w.dispatch(agent.lifecycle, { type: 'turn_assigned', turnId: `${agent.agentId}-1` });
    w.dispatch(agent.turn, { type: 'start_turn', input: 'go' });
  }
  w.dispatch(root.turn, { type: 'tool_calls_received', callIds: ['d1'], calls: [call] });
  w.spawn(root.call('d1'), 'tool-call', call);
  w.dispatch(root.call('d1'), { type: 'no_approval_needed' });
  const play = playEpic(conversationClose(), w.context(), w.scheduler);
  return { w, play };
}

/** A conversation whose one agent is idle with a call left open (its turn is over: left by a crash). */
function idleAgentWithOpenCall() {
  const w = machineWorld();
  w.spawn(ROOT, 'conversation', { conversationId: 'c1' });
  w.dispatch(ROOT, { type: 'agent_ready', rootAgentId: 'root' });
  w.spawn(root.lifecycle, 'agent-lifecycle', { agentId: 'root' });
  w.dispatch(root.lifecycle, { type: 'init_complete' });
  w.spawn(root.turn, 'turn-engine', { agentId: 'root' });
  w.spawn(root.call('c9'), 'tool-call', { callId: 'c9', toolName: 'clock', arguments: {} });
  return { w, play: playEpic(conversationClose(), w.context(), w.scheduler) };
}

/** What `agentTurns` does when an interrupted turn of `agent` ends (idle again with its rune), in its order: the round's open calls cancelled, the agent and the conversation told (with the turn's usage). */
const endInterrupted = async ({ w, play }: ReturnType<typeof busyConversation>, agent: typeof root, openCalls: readonly string[] = []): Promise<EpicCommand[]> => {
  const answered: EpicCommand[] = [];
  for (const callId of openCalls) answered.push(...(await play.send(w.dispatch(agent.call(callId), { type: 'cancelled', reason: CONVERSATION_CLOSING }))));
  const usage = { inputTokens: 5, outputTokens: 2, modelCalls: 1, toolCalls: 0, wallClockMs: 40 };
  answered.push(...(await play.send(w.dispatch(agent.lifecycle, { type: 'turn_interrupted', reason: CONVERSATION_CLOSING, usage }))));
  return answered;
};

describe('conversationClose: a closing conversation, step by step', () => {
  it('interrupts the turns in flight parents first, terminates idle agents with their stats, then cleanup_complete with the final stats; nothing after', async () => {
    const world = busyConversation();
    const { w, play } = world;

    // close_requested: the root's turn is interrupted, not its sub-agent's (its parent's turn is
    // still in flight); the idle agent is terminated at once, having run nothing.
    const first = await play.send(w.dispatch(ROOT, { type: 'close_requested', reason: 'user' }));
    expect(first).toEqual([interrupt(root.turn), terminate(idle.lifecycle, 0, 0)]);
    expect(await applyAll(play, w, first)).toEqual([]); // asked once: the turn's own interrupted rune asks nothing again

    // The root's turn ends (its delegate call cancelled): the root is idle, so it is terminated
    // with its stats (one turn, one call), and its sub-agent's turn is interrupted now.
    const second = await endInterrupted(world, root, ['d1']);
    expect(second).toEqual([interrupt(sub.turn), terminate(root.lifecycle, 1, 1)]);
    expect(await applyAll(play, w, second)).toEqual([]);
    expect(w.value(root.lifecycle)).toBe('terminated');
    expect(w.state<{ stats?: unknown }>(root.lifecycle)?.stats).toEqual({ turns: 1, toolCalls: 1 });

    // The sub-agent's turn ends: it is terminated; once that lands, every agent is terminated and
    // every call terminal: cleanup_complete with the conversation's final stats and usage.
    const third = await endInterrupted(world, sub);
    expect(third).toEqual([terminate(sub.lifecycle, 1, 0)]);
    const last = await applyAll(play, w, third);
    const usage = { inputTokens: 10, outputTokens: 4, modelCalls: 2, toolCalls: 0, wallClockMs: 80 }; // the two interrupted turns'
    expect(last).toEqual([{ stream: ROOT, event: { type: 'cleanup_complete', finalStats: { agents: 3, turns: 2, toolCalls: 1, cancelledToolCalls: 1, usage } } }]);
    await applyAll(play, w, last);
    expect(w.value(ROOT)).toBe('closed');

    // Closed: more runes under the conversation ask nothing more.
    expect(await play.send(w.dispatch(sub.turn, { type: 'start_turn', input: 'late' }))).toEqual([]);
    expect(play.frames).toHaveLength(first.length + second.length + third.length + last.length);
  });

  it('an idle agent with a call left open has the call cancelled first, then is terminated counting it', async () => {
    const { w, play } = idleAgentWithOpenCall();

    const first = await play.send(w.dispatch(ROOT, { type: 'close_requested' }));
    expect(first).toEqual([{ stream: root.call('c9'), event: { type: 'cancelled', reason: CONVERSATION_CLOSING } }, terminate(root.lifecycle, 0, 1)]);
    const last = await applyAll(play, w, first);
    expect(last).toEqual([
      {
        stream: ROOT,
        event: { type: 'cleanup_complete', finalStats: { agents: 1, turns: 0, toolCalls: 1, cancelledToolCalls: 1, usage: w.state<{ usage: unknown }>(ROOT)!.usage } },
      },
    ]);
  });

  it('asks each agent to end and each call to stop once, even when a look comes before the rune that answers it', async () => {
    const { w, play } = idleAgentWithOpenCall();
    const first = await play.send(w.dispatch(ROOT, { type: 'close_requested' }));
    expect(first).toEqual([{ stream: root.call('c9'), event: { type: 'cancelled', reason: CONVERSATION_CLOSING } }, terminate(root.lifecycle, 0, 1)]);
    // The call's rune lands and is heard before the agent's `parent_closed` is applied (the engine
    // applies an epic's commands one at a time): the agent, still idle, is not asked again.
    expect(await play.send(w.dispatch(root.call('c9'), { type: 'cancelled', reason: CONVERSATION_CLOSING }))).toEqual([]);
    expect(await play.send(w.dispatch(root.lifecycle, { type: 'parent_closed', stats: { turns: 0, toolCalls: 1 } }))).toMatchObject([
      { stream: ROOT, event: { type: 'cleanup_complete' } },
    ]);
  });

  it('stops the open plans of the conversation first (user_cancel, "conversation closing"); cleanup_complete only once they are stopped', async () => {
    const w = machineWorld();
    w.spawn(ROOT, 'conversation', { conversationId: 'c1' });
    w.dispatch(ROOT, { type: 'agent_ready', rootAgentId: 'root' });
    const [asking, executing, met] = ['p1', 'p2', 'p3'].map((id) => planStream('c1', id));
    const tasks = [{ id: 'a', description: 'do a', dependsOn: [], priority: 0, ownerRole: 'dev' }];
    for (const plan of [asking, executing, met]) w.spawn(plan!, 'autonomy-loop', { goal: 'ship it' });
    for (const plan of [executing, met]) {
      w.dispatch(plan!, { type: 'decompose_goal', planId: 'p', tasks });
      w.dispatch(plan!, { type: 'auto_start' });
    }
    w.dispatch(met!, { type: 'task_assigned', taskId: 'a', agentId: 'dev-1' });
    w.dispatch(met!, { type: 'task_completed', taskId: 'a', outcome: 'success', result: 'done' });
    w.dispatch(met!, { type: 'all_tasks_terminal' });
    w.dispatch(met!, { type: 'critique_passed' });
    const play = playEpic(conversationClose(), w.context(), w.scheduler);

    const first = await play.send(w.dispatch(ROOT, { type: 'close_requested' }));
    const cancel = (stream: string): EpicCommand => ({ stream, event: { type: 'user_cancel', reason: CONVERSATION_CLOSING } });
    expect(first).toEqual([cancel(asking!), cancel(executing!)]);
    const last = await applyAll(play, w, first);
    expect(last).toMatchObject([{ stream: ROOT, event: { type: 'cleanup_complete', finalStats: { agents: 0 } } }]);
    expect([asking, executing, met].map((plan) => w.state<AutonomyLoopState>(plan!)).map((state) => [state?.value, state?.reason])).toEqual([
      ['stopped', CONVERSATION_CLOSING],
      ['stopped', CONVERSATION_CLOSING],
      ['goal_met', undefined],
    ]);
  });

  it('an agent whose ReAct stream is spawned but whose lifecycle is not yet: the close waits for it, terminates it, then cleanup_complete', async () => {
    const w = machineWorld();
    w.spawn(ROOT, 'conversation', { conversationId: 'c1' });
    w.dispatch(ROOT, { type: 'agent_ready', rootAgentId: 'root' });
    const late = agentStreams(ROOT, 'late1');
    w.spawn(late.react, 'react-agent');
    const play = playEpic(conversationClose(), w.context(), w.scheduler);

    // Its lifecycle is on its way (reactAgentLifecycle spawns it with the stream): sealing now
    // would leave it spawning for good, its init_complete refused as sealed.
    expect(await play.send(w.dispatch(ROOT, { type: 'close_requested' }))).toEqual([]);
    const first = await play.send(w.spawn(late.lifecycle, 'agent-lifecycle', { agentId: 'late1' }));
    expect(first).toEqual([terminate(late.lifecycle, 0, 0)]);
    const last = await applyAll(play, w, first);
    expect(w.value(late.lifecycle)).toBe('terminated');
    expect(last).toMatchObject([{ stream: ROOT, event: { type: 'cleanup_complete', finalStats: { agents: 1 } } }]);
  });

  it('a call left open under an agent already terminated is cancelled, so the close does not wait on it for ever', async () => {
    const { w, play } = idleAgentWithOpenCall();
    w.dispatch(root.lifecycle, { type: 'kill', stats: { turns: 0, toolCalls: 1 } });

    const first = await play.send(w.dispatch(ROOT, { type: 'close_requested' }));
    expect(first).toEqual([{ stream: root.call('c9'), event: { type: 'cancelled', reason: CONVERSATION_CLOSING } }]);
    expect(await applyAll(play, w, first)).toMatchObject([{ stream: ROOT, event: { type: 'cleanup_complete', finalStats: { agents: 1, cancelledToolCalls: 1 } } }]);
  });

  it('a conversation that is not closing is left alone', async () => {
    const { w, play } = busyConversation();
    expect(await play.send(w.dispatch(root.turn, { type: 'interrupt', reason: 'user stop' }))).toEqual([]);
    expect(await play.send(w.dispatch(ROOT, { type: 'new_turn' }))).toEqual([]);
    expect(play.frames).toEqual([]);
  });
});
