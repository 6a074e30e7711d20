import { describe, expect, it } from 'vitest';
import { agentStreams, type EpicCommand, type Rune, type ToolCallState } from '../../../src/index.js';
import { delegation as delegationEpic, subAgentId, type DelegationOptions } from '../../../src/effects/agent/delegation.js';
import { INTERRUPTED_BY_RESTART } from '../../../src/effects/tool-call-recovery.js';
import { applyAll, machineWorld, playEpic } from '../../support/frames.js';

/**
 * The `delegation` epic alone, in virtual time, on a log in memory played by the real machines
 * (`machineWorld`): the test sends the runes the engine would (a delegate call entering
 * `executing`, the sub-agent's turn streaming and ending) and applies what the epic emits. Its
 * steps await the log, so each frame is a rune sent and the commands it led to once they settled.
 */

const ROOT = 'conv/c1';
const roles: DelegationOptions['roles'] = { researcher: { model: 'small' } };
const delegateCall = (callId: string, args: unknown = { role: 'researcher', task: 'find the answer' }) => ({ callId, toolName: 'delegate', arguments: args });

/** The delegation epic, each run's claim `run-1`. */
const delegation = (options: DelegationOptions) => delegationEpic({ claimId: () => 'run-1', ...options });

/**
 * Sends the rune that starts a delegate call's run (none: the store's listing at start): its first
 * command is the call's claim (superseding `supersedes`), which is applied and heard; resolves with
 * what followed.
 */
async function claimed(play: ReturnType<typeof playEpic>, w: ReturnType<typeof machineWorld>, stream: string, rune?: Rune, supersedes?: string): Promise<EpicCommand[]> {
  const claim = rune === undefined ? await play.send() : await play.send(rune);
  expect(claim).toEqual([{ stream, event: { type: 'execution_claimed', claim: 'run-1', ...(supersedes === undefined ? {} : { supersedes }) } }]);
  return applyAll(play, w, claim);
}

/** A conversation with its root agent idle, plus the agents of `chain`, each a sub-agent (a researcher) of the one before it. */
function conversation(chain: readonly string[] = []) {
  const w = machineWorld();
  w.spawn(ROOT, 'conversation', { conversationId: 'c1' });
  w.dispatch(ROOT, { type: 'agent_ready', rootAgentId: 'root' });
  let parentId: string | undefined;
  for (const agentId of ['root', ...chain]) {
    const agent = agentStreams(ROOT, agentId);
    w.spawn(agent.lifecycle, 'agent-lifecycle', { agentId, ...(parentId === undefined ? {} : { parentId, role: 'researcher' }) });
    w.dispatch(agent.lifecycle, { type: 'init_complete' });
    parentId = agentId;
  }
  return w;
}

/** A call of `agent` created and sent on to `executing`: the rune that starts the delegation (already applied, not sent). */
function executingCall(w: ReturnType<typeof machineWorld>, agentId: string, call: ReturnType<typeof delegateCall>) {
  const stream = agentStreams(ROOT, agentId).call(call.callId);
  w.spawn(stream, 'tool-call', call);
  return { stream, rune: w.dispatch(stream, { type: 'no_approval_needed' }) };
}

describe('delegation: limits', () => {
  it('a sub-agent deeper than maxDepth: the call ends with an execution_error naming the limit, and nothing is spawned', async () => {
    const w = conversation(['root.a']);
    const play = playEpic(delegation({ roles, maxDepth: 1 }), w.context(), w.scheduler);
    const { stream, rune } = executingCall(w, 'root.a', delegateCall('d1'));
    expect(await claimed(play, w, stream, rune)).toEqual([
      { stream, event: { type: 'execution_error', error: 'delegate: a sub-agent of "root.a" would be at depth 2, over delegation.maxDepth (1)' } },
    ]);
  });

  it('a conversation at maxAgents: the call ends with an execution_error naming the limit', async () => {
    const w = conversation(['root.a']);
    const play = playEpic(delegation({ roles, maxAgents: 2 }), w.context(), w.scheduler);
    const { stream, rune } = executingCall(w, 'root', delegateCall('d1'));
    expect(await claimed(play, w, stream, rune)).toEqual([
      { stream, event: { type: 'execution_error', error: 'delegate: the conversation has 2 agents, delegation.maxAgents (2)' } },
    ]);
  });

  it('a role that is not configured, or no task: refused, naming what is wrong, unclaimed', async () => {
    const w = conversation();
    const play = playEpic(delegation({ roles }), w.context(), w.scheduler);
    const unknown = executingCall(w, 'root', delegateCall('d1', { role: 'poet', task: 'a sonnet' }));
    const empty = executingCall(w, 'root', delegateCall('d2', { role: 'researcher' }));
    expect(await play.send(unknown.rune)).toEqual([
      { stream: unknown.stream, event: { type: 'execution_error', error: 'delegate: no role "poet"; the roles are researcher' } },
    ]);
    expect(await play.send(empty.rune)).toMatchObject([{ stream: empty.stream, event: { type: 'execution_error', error: expect.stringMatching(/^delegate: task: /) } }]);
  });
});

describe('delegation: a delegate call runs a sub-agent', () => {
  it("spawns the sub-agent (role, model, parentId), starts its turn with the task, and ends the call with the turn's output", async () => {
    const w = conversation();
    const play = playEpic(delegation({ roles }), w.context(), w.scheduler);
    const { stream, rune } = executingCall(w, 'root', delegateCall('d1'));
    const sub = agentStreams(ROOT, subAgentId('root', 'd1'));
    const started = await claimed(play, w, stream, rune);
    expect(started).toEqual([
      { stream: sub.lifecycle, spawn: 'agent-lifecycle', input: { agentId: 'root.d1', role: 'researcher', parentId: 'root', model: 'small' } },
      { stream: sub.turn, spawn: 'turn-engine', input: { agentId: 'root.d1' } },
      { stream: sub.turn, event: { type: 'start_turn', input: 'find the answer' } },
    ]);
    expect(await applyAll(play, w, started)).toEqual([]);
    expect(w.value(sub.turn)).toBe('streaming');

    // The sub-agent streams its answer; the call waits for the turn's end, then takes its output.
    expect(await play.send(w.dispatch(sub.turn, { type: 'assistant_delta', content: 'forty-' }))).toEqual([]);
    expect(await play.send(w.dispatch(sub.turn, { type: 'assistant_delta', content: 'two' }))).toEqual([]);
    expect(await play.send(w.dispatch(sub.turn, { type: 'response_done' }))).toEqual([{ stream, event: { type: 'success', output: 'forty-two' } }]);
  });

  it("a sub-agent's turn that fails or is interrupted ends the call with an execution_error saying so", async () => {
    const w = conversation();
    const play = playEpic(delegation({ roles }), w.context(), w.scheduler);
    const failing = executingCall(w, 'root', delegateCall('d1'));
    const stopped = executingCall(w, 'root', delegateCall('d2'));
    await applyAll(play, w, await claimed(play, w, failing.stream, failing.rune));
    await applyAll(play, w, await claimed(play, w, stopped.stream, stopped.rune));
    expect(await play.send(w.dispatch(agentStreams(ROOT, 'root.d1').turn, { type: 'stream_error', error: 'HTTP 503' }))).toEqual([
      { stream: failing.stream, event: { type: 'execution_error', error: "the sub-agent's turn failed: HTTP 503" } },
    ]);
    expect(await play.send(w.dispatch(agentStreams(ROOT, 'root.d2').turn, { type: 'interrupt', reason: 'user stop' }))).toEqual([
      { stream: stopped.stream, event: { type: 'execution_error', error: "the sub-agent's turn was interrupted: user stop" } },
    ]);
  });

  it('a conversation that takes no turn (paused): the call ends with an execution_error saying so, and nothing is spawned', async () => {
    const w = conversation();
    w.dispatch(ROOT, { type: 'pause_requested', reason: 'user' });
    const play = playEpic(delegation({ roles }), w.context(), w.scheduler);
    const { stream, rune } = executingCall(w, 'root', delegateCall('d1'));
    expect(await claimed(play, w, stream, rune)).toEqual([
      { stream, event: { type: 'execution_error', error: "the sub-agent's turn could not start: the conversation is paused" } },
    ]);
    expect(w.value(agentStreams(ROOT, 'root.d1').lifecycle)).toBeUndefined();
  });

  it('paused after the task was sent but before it started (the engine holds the start back, telling no epic): the call ends with an execution_error; a pause once it started does not', async () => {
    const w = conversation();
    const play = playEpic(delegation({ roles }), w.context(), w.scheduler);
    const held = executingCall(w, 'root', delegateCall('d1'));
    const running = executingCall(w, 'root', delegateCall('d2'));
    const heldCommands = await claimed(play, w, held.stream, held.rune);
    expect(heldCommands.at(-1)).toEqual({ stream: agentStreams(ROOT, 'root.d1').turn, event: { type: 'start_turn', input: 'find the answer' } });
    await applyAll(play, w, heldCommands.slice(0, -1)); // its spawns only: its start is held back
    await applyAll(play, w, await claimed(play, w, running.stream, running.rune)); // started
    expect(await play.send(w.dispatch(ROOT, { type: 'pause_requested', reason: 'user' }))).toEqual([
      { stream: held.stream, event: { type: 'execution_error', error: "the sub-agent's turn could not start: the conversation is paused" } },
    ]);
    // The running sub-agent's turn goes on; its end is the other call's result.
    expect(await play.send(w.dispatch(agentStreams(ROOT, 'root.d2').turn, { type: 'response_done' }))).toEqual([
      { stream: running.stream, event: { type: 'success', output: '' } },
    ]);
  });

  it("a cancelled delegate call interrupts its sub-agent's turn with the call's reason", async () => {
    const w = conversation();
    const play = playEpic(delegation({ roles }), w.context(), w.scheduler);
    const { stream, rune } = executingCall(w, 'root', delegateCall('d1'));
    await applyAll(play, w, await claimed(play, w, stream, rune));
    expect(await play.send(w.dispatch(stream, { type: 'cancelled', reason: 'conversation closing' }))).toEqual([
      { stream: agentStreams(ROOT, 'root.d1').turn, event: { type: 'interrupt', reason: 'conversation closing' } },
    ]);
  });

  it('a claim id the machine would refuse ends the call with an error naming it; nothing is spawned', async () => {
    const w = conversation();
    const play = playEpic(delegation({ roles, claimId: () => 'x'.repeat(129) }), w.context(), w.scheduler);
    const { stream, rune } = executingCall(w, 'root', delegateCall('d1'));
    expect(await play.send(rune)).toEqual([
      {
        stream,
        event: {
          type: 'execution_error',
          error: 'the delegation failed: TypeError: "claimId" gave an id the machine refuses: ✖ Too big: expected string to have <=128 characters → at claim',
        },
      },
    ]);
    expect(w.value(agentStreams(ROOT, 'root.d1').lifecycle)).toBeUndefined();
    expect(() => delegation({ roles, claimId: 'mine' as never })).toThrow('delegation: "claimId" must be a function giving a new claim id, got string');
  });

  it("a call whose first claim heard is another runner's spawns nothing: that runner has it", async () => {
    const w = conversation();
    const play = playEpic(delegation({ roles }), w.context(), w.scheduler);
    const { stream, rune } = executingCall(w, 'root', delegateCall('d1'));
    expect(await play.send(rune)).toEqual([{ stream, event: { type: 'execution_claimed', claim: 'run-1' } }]);
    // Another runner's claim is recorded first; this run's is then refused (not applied here).
    expect(await play.send(w.dispatch(stream, { type: 'execution_claimed', claim: 'other' }))).toEqual([]);
    expect(w.value(agentStreams(ROOT, 'root.d1').lifecycle)).toBeUndefined();
  });
});

describe('delegation: after a restart', () => {
  /** A delegate call left `executing` by a process that died, claimed by it, its sub-agent spawned and its turn started. */
  function leftRunning() {
    const w = conversation();
    const { stream } = executingCall(w, 'root', delegateCall('d1'));
    w.dispatch(stream, { type: 'execution_claimed', claim: 'dead' });
    const sub = agentStreams(ROOT, 'root.d1');
    w.spawn(sub.lifecycle, 'agent-lifecycle', { agentId: 'root.d1', role: 'researcher', parentId: 'root' });
    w.spawn(sub.turn, 'turn-engine', { agentId: 'root.d1' });
    w.dispatch(sub.turn, { type: 'start_turn', input: 'find the answer' });
    w.dispatch(sub.turn, { type: 'assistant_delta', content: 'forty-' });
    return { w, stream, sub };
  }

  it("the resumed call is claimed again, superseding the dead claim, finds its sub-agent and waits again: one claim, no second spawn, no second turn; the result is that turn's", async () => {
    const { w, stream, sub } = leftRunning();
    const play = playEpic(delegation({ roles }), w.context(), w.scheduler);
    expect(await claimed(play, w, stream, undefined, 'dead')).toEqual([]); // listed from the store at start: claimed, then it only listens
    expect(w.state<ToolCallState>(stream)).toMatchObject({ value: 'executing', claim: 'run-1', attempt: 2 });
    expect(await play.send(w.dispatch(sub.turn, { type: 'assistant_delta', content: 'two' }))).toEqual([]);
    expect(await play.send(w.dispatch(sub.turn, { type: 'response_done' }))).toEqual([{ stream, event: { type: 'success', output: 'forty-two' } }]);
  });

  it('a turn that ended while the process was down gives the result at once', async () => {
    const { w, stream, sub } = leftRunning();
    w.dispatch(sub.turn, { type: 'response_done' });
    const play = playEpic(delegation({ roles }), w.context(), w.scheduler);
    expect(await claimed(play, w, stream, undefined, 'dead')).toEqual([{ stream, event: { type: 'success', output: 'forty-' } }]);
  });

  it("a first turn cut by the restart is started once more with the task when it is idle; its result is the call's", async () => {
    const { w, stream, sub } = leftRunning();
    const play = playEpic(delegation({ roles }), w.context(), w.scheduler);
    expect(await claimed(play, w, stream, undefined, 'dead')).toEqual([]);
    // The interrupt leaves the turn idle again: the task starts once more at once.
    const again: EpicCommand[] = await play.send(w.dispatch(sub.turn, { type: 'interrupt', reason: INTERRUPTED_BY_RESTART }));
    expect(again).toEqual([{ stream: sub.turn, event: { type: 'start_turn', input: 'find the answer' } }]);
    await applyAll(play, w, again);
    expect(await play.send(w.dispatch(sub.turn, { type: 'response_done' }))).toEqual([{ stream, event: { type: 'success', output: '' } }]);
  });
});
