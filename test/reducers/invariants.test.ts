import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  agentLifecycle,
  agentStreams,
  autonomyLoop,
  checkInvariants,
  conversation,
  InvariantViolation,
  SPAWN_EVENT_TYPE,
  toolCall,
  turnEngine,
  type EventObject,
  type Machine,
  type Rune,
  type ToolCallEvent,
  type TurnEngineEvent,
} from '../../src/index.js';

/**
 * The runes an engine logs for one instance: its spawn, then one rune per accepted event
 * (rejected events append nothing).
 */
function runesOf<S extends { value: string }, E extends EventObject, I>(stream: string, machine: Machine<S, E, I>, input: I, events: readonly E[]): Rune[] {
  let state = machine.initial(input);
  const runes: Rune[] = [];
  const rune = (kind: string, event: Rune['event'], to: string, from?: string): Rune => ({
    stream,
    seq: runes.length + 1,
    machine: machine.id,
    kind,
    event,
    ...(from === undefined ? {} : { from }),
    to,
    at: runes.length,
  });
  runes.push(rune(machine.spawnKind, { type: SPAWN_EVENT_TYPE, input }, state.value));
  for (const event of events) {
    const step = machine.step(state, event);
    if (!step.accepted) continue;
    runes.push(rune(step.kind, event as Rune['event'], step.state.value, state.value));
    state = step.state;
  }
  return runes;
}

/** Like `runesOf`, for a run every event of which must be accepted. */
function validRun<S extends { value: string }, E extends EventObject, I>(stream: string, machine: Machine<S, E, I>, input: I, events: readonly E[]): Rune[] {
  const runes = runesOf(stream, machine, input, events);
  expect(runes, `every event of ${stream} is accepted`).toHaveLength(events.length + 1);
  return runes;
}

/** Several streams' logs merged as a shared log would hold them: round-robin, each stream in order. */
function interleave(logs: readonly Rune[][]): Rune[] {
  const out: Rune[] = [];
  for (let i = 0; out.length < logs.reduce((n, log) => n + log.length, 0); i++) {
    for (const log of logs) if (i < log.length) out.push(log[i]!);
  }
  return out;
}

/** A rune appended by hand after `log`'s last one, in the same stream. */
const next = (log: readonly Rune[], rune: Pick<Rune, 'kind' | 'event'> & Partial<Rune>): Rune => ({
  stream: log[0]!.stream,
  seq: log.length + 1,
  machine: log[0]!.machine,
  at: log.length,
  ...rune,
});

const call = { callId: 'c1', toolName: 'shell', arguments: { cmd: 'ls' } };

describe('checkInvariants: clean logs', () => {
  const validRuns = (): Rune[][] => [
    validRun('turns', turnEngine, undefined, [
      { type: 'start_turn', input: 'list files' },
      { type: 'assistant_delta', content: 'Looking' },
      { type: 'tool_calls_received', callIds: ['c1', 'c2'] },
      { type: 'tools_finished', more: true },
      { type: 'steer', input: 'only .ts' },
      { type: 'turn_finalized' },
      { type: 'start_turn', input: 'only .ts' },
      { type: 'tool_calls_received', callIds: ['c3'] },
      { type: 'tool_crash', error: 'sandbox died' },
      { type: 'turn_finalized' },
      { type: 'start_turn', input: 'retry' },
      { type: 'response_done' },
    ]),
    validRun('call-approved', toolCall, call, [
      { type: 'requires_approval', policyReason: 'shell' },
      { type: 'approved', approver: 'ana' },
      { type: 'progress_update', chunk: 'a.ts' },
      { type: 'success', output: ['a.ts'] },
    ]),
    validRun('call-auto', toolCall, call, [{ type: 'auto_approved' }, { type: 'execution_error', error: 'exit 2' }]),
    validRun('call-free', toolCall, call, [{ type: 'no_approval_needed' }, { type: 'execution_timeout' }]),
    validRun('call-denied', toolCall, call, [{ type: 'requires_approval' }, { type: 'denied', reason: 'no' }]),
    validRun('call-unanswered', toolCall, call, [{ type: 'requires_approval' }, { type: 'approval_timeout' }]),
    validRun('call-cancelled-waiting', toolCall, call, [{ type: 'requires_approval' }, { type: 'cancelled' }]),
    validRun('call-cancelled-pending', toolCall, call, [{ type: 'cancelled', reason: 'turn interrupted' }]),
    validRun('call-cancelled-running', toolCall, call, [{ type: 'no_approval_needed' }, { type: 'cancelled' }]),
    validRun('conv', conversation, { conversationId: 'conv' }, [
      { type: 'first_message' },
      { type: 'new_turn' },
      { type: 'pause_requested' },
      { type: 'turn_completed' },
      { type: 'resume_requested' },
      { type: 'error_threshold' },
      { type: 'reset' },
      { type: 'close_requested' },
      { type: 'cleanup_complete' },
      { type: 'archive_requested' },
    ]),
    validRun('agent', agentLifecycle, { agentId: 'a1' }, [
      { type: 'init_complete' },
      { type: 'turn_assigned', turnId: 't1' },
      { type: 'turn_completed' },
      { type: 'turn_assigned', turnId: 't2' },
      { type: 'turn_interrupted' },
      { type: 'turn_assigned', turnId: 't3' },
      { type: 'turn_error' },
      { type: 'turn_assigned', turnId: 't4' },
      { type: 'kill', force: true },
    ]),
    validRun('plan', autonomyLoop, { goal: 'ship' }, [
      { type: 'decompose_goal', planId: 'p1', tasks: [{ id: 'build', description: 'build it', dependsOn: [], priority: 0, ownerRole: 'dev' }] },
      { type: 'plan_approved' },
      { type: 'task_assigned', taskId: 'build', agentId: 'a1' },
      { type: 'task_started', taskId: 'build', turnNumber: 1 },
      { type: 'task_completed', morePending: false, taskId: 'build', outcome: 'failure', result: 'broken' },
      { type: 'all_tasks_terminal' },
      { type: 'needs_replan' },
      { type: 'plan_rejected' },
      {
        type: 'decompose_goal',
        planId: 'p2',
        tasks: [
          { id: 'build', description: 'build it', dependsOn: [], priority: 0, ownerRole: 'dev' },
          { id: 'test', description: 'test it', dependsOn: ['build'], priority: 0, ownerRole: 'dev' },
        ],
      },
      { type: 'auto_start' },
      { type: 'task_assigned', taskId: 'build', agentId: 'a1' },
      { type: 'task_completed', taskId: 'build', outcome: 'failure', result: 'broken' },
      { type: 'all_runnable_blocked' },
      { type: 'retry_task', taskId: 'build' },
      { type: 'dependency_resolved' },
      { type: 'task_assigned', taskId: 'build', agentId: 'a1' },
      { type: 'task_completed', taskId: 'build', outcome: 'success', result: 'built' },
      { type: 'task_assigned', taskId: 'test', agentId: 'a1' },
      { type: 'task_completed', taskId: 'test', outcome: 'success', result: 'tested' },
      { type: 'all_tasks_terminal' },
      { type: 'critique_passed', summary: 'shipped' },
    ]),
  ];

  it('valid runs of every machine, interleaved in one log, break no invariant', () => {
    const log = interleave(validRuns());
    expect(new Set(log.map((r) => r.machine))).toEqual(new Set(['turn-engine', 'tool-call', 'conversation', 'agent-lifecycle', 'autonomy-loop']));
    expect(checkInvariants(log)).toEqual([]);
  });

  it('an empty log is clean', () => {
    expect(checkInvariants([])).toEqual([]);
  });
});

describe('checkInvariants: each invariant, found at its rune', () => {
  it('INV-TOOL-CALL-BEFORE-RESULT: a tool.result with no earlier tool.call', () => {
    const [, ...withoutCall] = validRun('call-1', toolCall, call, [{ type: 'no_approval_needed' }, { type: 'success', output: 1 }]);
    const result = withoutCall[1]!;
    expect(checkInvariants(withoutCall)).toEqual([
      { invariant: 'INV-TOOL-CALL-BEFORE-RESULT', rune: result, message: 'stream "call-1" seq 3: tool.result with no earlier tool.call' },
    ]);
  });

  it('INV-TOOL-TERMINAL: a second outcome for a call', () => {
    const log = validRun('call-1', toolCall, call, [{ type: 'no_approval_needed' }, { type: 'success', output: 1 }]);
    const second = next(log, { kind: 'tool.result', event: { type: 'execution_error', error: 'late' }, from: 'executing', to: 'error_result' });
    expect(checkInvariants([...log, second])).toEqual([
      {
        invariant: 'INV-TOOL-TERMINAL',
        rune: second,
        message: 'stream "call-1" seq 4: tool.result is a second outcome for the call; its first was tool.result at seq 3',
      },
    ]);
  });

  it("INV-TOOL-TERMINAL: a denial is the call's outcome, so a result after it is a second one", () => {
    const log = validRun('call-1', toolCall, call, [{ type: 'requires_approval' }, { type: 'denied' }]);
    const result = next(log, { kind: 'tool.result', event: { type: 'approval_timeout' }, from: 'awaiting_approval', to: 'timeout_result' });
    expect(checkInvariants(log)).toEqual([]);
    expect(checkInvariants([...log, result])).toMatchObject([{ invariant: 'INV-TOOL-TERMINAL', rune: result }]);
  });

  it('INV-TOOL-TERMINAL: a call that never ends, only when the log is complete', () => {
    const log = validRun('call-1', toolCall, call, [{ type: 'no_approval_needed' }, { type: 'progress_update', chunk: '...' }]);
    const other = validRun('call-2', toolCall, call, [{ type: 'no_approval_needed' }, { type: 'success', output: 1 }]);
    const violation = {
      invariant: 'INV-TOOL-TERMINAL',
      rune: log[0],
      message: 'stream "call-1" seq 1: tool.call never got an outcome (a tool.result or tool.denied)',
    };
    expect(checkInvariants(interleave([other, log]))).toEqual([violation]);
    expect(checkInvariants(interleave([other, log]), { complete: true })).toEqual([violation]);
    expect(checkInvariants(interleave([other, log]), { complete: false })).toEqual([]);
  });

  it.each([
    ['entering executing other than by approval', { kind: 'no_approval_needed', event: { type: 'no_approval_needed' }, from: 'awaiting_approval', to: 'executing' }],
    ['progress', { kind: 'tool.progress', event: { type: 'progress_update', chunk: 'x' }, from: 'executing', to: 'executing' }],
    ['a result out of executing', { kind: 'tool.result', event: { type: 'success', output: 1 }, from: 'executing', to: 'completed_result' }],
  ] as const)('INV-TOOL-APPROVAL-BEFORE-EXEC: %s after an approval request', (_, fields) => {
    const log = validRun('call-1', toolCall, call, [{ type: 'requires_approval' }]);
    const execution = next(log, { ...fields, event: { ...fields.event } });
    expect(checkInvariants([...log, execution], { complete: false })).toEqual([
      {
        invariant: 'INV-TOOL-APPROVAL-BEFORE-EXEC',
        rune: execution,
        message: `stream "call-1" seq 3: ${fields.kind} executes the call before approval (requested at seq 2)`,
      },
    ]);
  });

  it('INV-TOOL-APPROVAL-BEFORE-EXEC: a result that is not an execution (approval timeout, cancel) is fine', () => {
    const log = validRun('call-1', toolCall, call, [{ type: 'requires_approval' }, { type: 'approval_timeout' }]);
    expect(checkInvariants(log)).toEqual([]);
  });

  it('INV-TURN-SEQUENTIAL: a turn starts while the previous one runs', () => {
    const log = validRun('turns', turnEngine, undefined, [
      { type: 'start_turn', input: 'one' },
      { type: 'response_done' },
      { type: 'turn_finalized' },
      { type: 'start_turn', input: 'two' },
      { type: 'assistant_delta', content: '...' },
    ]);
    const overlapping = next(log, { kind: 'turn.started', event: { type: 'start_turn', input: 'three' }, from: 'streaming', to: 'streaming' });
    expect(checkInvariants([...log, overlapping])).toEqual([
      {
        invariant: 'INV-TURN-SEQUENTIAL',
        rune: overlapping,
        message: 'stream "turns" seq 7: turn.started while the turn started at seq 5 has not ended',
      },
    ]);
  });

  it('INV-TURN-SEQUENTIAL is per stream: two agents may run turns at once', () => {
    const a = validRun('agent-a', agentLifecycle, {}, [{ type: 'init_complete' }, { type: 'turn_assigned' }]);
    const b = validRun('agent-b', agentLifecycle, {}, [{ type: 'init_complete' }, { type: 'turn_assigned' }]);
    expect(checkInvariants(interleave([a, b]))).toEqual([]);
  });

  describe('INV-TURN-SEQUENTIAL is per agent: its turn stream and its ReAct stream together', () => {
    const agent = agentStreams('conv/c1', 'a1');
    const turns = validRun(agent.turn, turnEngine, undefined, [{ type: 'start_turn', input: 'one' }, { type: 'response_done' }]);
    /** A model call of the agent's ReAct loop: a turn of its lifecycle, `react-<seq>` (the seq of the rune on `.../react` that started it). */
    const reactCall = validRun(agent.lifecycle, agentLifecycle, { agentId: 'a1' }, [
      { type: 'init_complete' },
      { type: 'turn_assigned', turnId: 'react-1' },
      { type: 'turn_completed' },
      // Its payloads name the turn, as the lifecycle's do (runesOf leaves payloads out).
    ]).map((rune) => (rune.kind.startsWith('turn.') ? { ...rune, payload: { agentId: 'a1', turnId: 'react-1' } } : rune));

    it('a bad log: a turn starts on one stream while a turn of the same agent is open on the other', () => {
      const [spawned, started, done] = turns as [Rune, Rune, Rune];
      const [lifecycle, ready, callStarted, callDone] = reactCall as [Rune, Rune, Rune, Rune];
      // The ReAct loop calls the model while the turn streams, and the reverse.
      expect(checkInvariants([spawned, started, lifecycle, ready, callStarted])).toEqual([
        {
          invariant: 'INV-TURN-SEQUENTIAL',
          rune: callStarted,
          message: `stream "${agent.lifecycle}" seq 3: turn.started while the same agent's turn on "${agent.turn}" (started at seq 2) has not ended`,
        },
      ]);
      expect(checkInvariants([lifecycle, ready, callStarted, spawned, started, done, callDone]).map((v) => v.message)).toEqual([
        `stream "${agent.turn}" seq 2: turn.started while the same agent's turn on "${agent.react}" (started at seq 3) has not ended`,
      ]);
    });

    it('a clean log: the two kinds one after the other, the agent lifecycle beside its turn, and two agents at once', () => {
      const [spawned, started, done] = turns as [Rune, Rune, Rune];
      const other = validRun(agentStreams('conv/c1', 'a2').turn, turnEngine, undefined, [{ type: 'start_turn', input: 'two' }, { type: 'response_done' }]);
      expect(checkInvariants([...reactCall, ...interleave([[spawned, started, done], other])])).toEqual([]);
    });
  });

  describe('INV-AGENT-BUDGET: no turn started over budget', () => {
    const lifecycle = agentStreams('conv/c1', 'a1').lifecycle;
    const turnsOf = (stream: string) => validRun(stream, agentLifecycle, { agentId: 'a' }, [{ type: 'init_complete' }, { type: 'turn_assigned' }, { type: 'turn_completed' }]);
    const exhausted = { type: 'budget_exhausted', reason: 'agent budget exhausted: toolCalls 3 of 3' } as const;

    it("a bad log: a turn started after the agent's budget_exhausted, and while its conversation is suspended for budget", () => {
      const agent = turnsOf(lifecycle);
      const terminated = next(agent, { kind: 'agent.terminated', event: exhausted, from: 'idle', to: 'terminated' });
      // Hand-made: the machine would refuse it (terminated is terminal), a foreign writer did not.
      const late = next([...agent, terminated], { kind: 'turn.started', event: { type: 'turn_assigned' }, from: 'terminated', to: 'running_turn' });
      const talk = validRun('conv/c1', conversation, {}, [{ type: 'agent_ready' }, { type: 'budget_exhausted', reason: 'conversation budget exhausted: cost 1 of 1' }]);
      const other = turnsOf('conv/c1/agent/a2').slice(0, 2);
      const sneaked = next(other, { kind: 'turn.started', event: { type: 'turn_assigned' }, from: 'idle', to: 'running_turn' });
      const found = checkInvariants([...agent, terminated, late, ...talk, ...other, sneaked]);
      expect(found.map((v) => [v.invariant, v.message])).toEqual([
        ['INV-AGENT-BUDGET', `stream "${lifecycle}" seq 6: turn.started after the agent's budget was exhausted (agent.terminated at seq 5)`],
        ['INV-AGENT-BUDGET', 'stream "conv/c1/agent/a2" seq 3: turn.started while its conversation is suspended for budget (stream "conv/c1" seq 3)'],
      ]);
    });

    it('a clean log: turns before the exhaustion, after a replenish, in other conversations, and a turn stream interrupted at once', () => {
      const talk = validRun('conv/c1', conversation, {}, [{ type: 'agent_ready' }, { type: 'budget_exhausted' }, { type: 'budget_replenished' }, { type: 'error_threshold' }]);
      const [spawned, activated, suspended, unsuspended, suspendedForErrors] = talk;
      const agent = turnsOf(lifecycle);
      const elsewhere = turnsOf('conv/c2/agent/a1');
      // A turn stream's start that agentTurns interrupted at once: never assigned to the agent.
      const refused = validRun('conv/c1/agent/a1/turn', turnEngine, undefined, [
        { type: 'start_turn', input: 'go' },
        { type: 'interrupt', reason: 'the conversation is suspended' },
      ]);
      const log = [spawned!, activated!, ...agent, suspended!, ...refused, ...elsewhere, unsuspended!, ...turnsOf('conv/c1/agent/a2'), suspendedForErrors!];
      expect(checkInvariants(log)).toEqual([]);
      const end = next(agent, { kind: 'agent.terminated', event: exhausted, from: 'idle', to: 'terminated' });
      expect(checkInvariants([...agent, end])).toEqual([]);
    });
  });

  it('reports several violations in the order of their runes, each of them well-formed', () => {
    const unfinished = validRun('call-1', toolCall, call, [{ type: 'no_approval_needed' }]);
    const [, ...orphanLog] = validRun('call-2', toolCall, call, [{ type: 'auto_approved' }, { type: 'execution_timeout' }]);
    const found = checkInvariants([...unfinished, ...orphanLog]);
    expect(found.map((v) => [v.invariant, v.rune.stream, v.rune.seq])).toEqual([
      ['INV-TOOL-TERMINAL', 'call-1', 1],
      ['INV-TOOL-CALL-BEFORE-RESULT', 'call-2', 3],
    ]);
    for (const violation of found) expect(InvariantViolation.safeParse(violation).success).toBe(true);
  });
});

describe('checkInvariants: properties', () => {
  const toolEvents: ToolCallEvent[] = [
    { type: 'requires_approval' },
    { type: 'auto_approved' },
    { type: 'no_approval_needed' },
    { type: 'approved' },
    { type: 'denied' },
    { type: 'approval_timeout' },
    { type: 'progress_update', chunk: 'x' },
    { type: 'success', output: null },
    { type: 'execution_error', error: 'e' },
    { type: 'execution_timeout' },
    { type: 'cancelled' },
  ];
  const turnEvents: TurnEngineEvent[] = [
    { type: 'start_turn', input: 'i' },
    { type: 'assistant_delta', content: 'c' },
    { type: 'tool_calls_received', callIds: ['c1'] },
    { type: 'response_done' },
    { type: 'interrupt' },
    { type: 'steer', input: 's' },
    { type: 'stream_error', error: 'e' },
    { type: 'tools_finished', more: true },
    { type: 'tools_finished', more: false },
    { type: 'tool_crash', error: 'e' },
    { type: 'turn_finalized' },
  ];
  const runs = fc.record({
    calls: fc.array(fc.array(fc.constantFrom(...toolEvents), { maxLength: 8 }), { maxLength: 5 }),
    turns: fc.array(fc.array(fc.constantFrom(...turnEvents), { maxLength: 40 }), { maxLength: 3 }),
  });
  const logsOf = ({ calls, turns }: { calls: ToolCallEvent[][]; turns: TurnEngineEvent[][] }) => ({
    callLogs: calls.map((events, i) => runesOf(`call-${i}`, toolCall, call, events)),
    turnLogs: turns.map((events, i) => runesOf(`turns-${i}`, turnEngine, undefined, events)),
  });

  it('a live log folded from random events through toolCall and turnEngine breaks no invariant', () => {
    fc.assert(
      fc.property(runs, (r) => {
        const { callLogs, turnLogs } = logsOf(r);
        expect(checkInvariants(interleave([...callLogs, ...turnLogs]), { complete: false })).toEqual([]);
      }),
    );
  });

  it('completed, the same log breaks only INV-TOOL-TERMINAL, exactly at the calls that did not end', () => {
    fc.assert(
      fc.property(runs, (r) => {
        const { callLogs, turnLogs } = logsOf(r);
        const unfinished = callLogs.filter((log) => !toolCall.terminal.includes(log.at(-1)!.to!)).map((log) => log[0]);
        const found = checkInvariants(interleave([...callLogs, ...turnLogs]));
        expect(found.map((v) => v.invariant)).toEqual(unfinished.map(() => 'INV-TOOL-TERMINAL'));
        expect(found.map((v) => v.rune)).toEqual(unfinished);
      }),
    );
  });
});
