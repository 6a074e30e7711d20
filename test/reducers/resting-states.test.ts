import { describe, expect, it } from 'vitest';
import {
  agentTransition,
  atRest,
  autonomyLoop,
  initialAgentState,
  machines,
  reactAgentRest,
  restingStates,
  toolCall,
  type AgentInput,
  type AgentState,
  type AutonomyLoopEvent,
  type AutonomyLoopState,
  type MachineId,
} from '../../src/index.js';
import { stateAt } from '../support/machine-properties.js';

const finiteIds = (Object.keys(machines) as MachineId[]).filter((id) => machines[id].states.length > 0);
const keyOf = (entry: { machine: string; state: string | null }): string => `${entry.machine}/${entry.state}`;
/** The instance of `machine` in `value`, as the oracle would ask about it. */
const restOf = (machine: MachineId, value: string) => atRest(machine, stateAt(machines[machine] as never, value as never, {}, inputs[machine]))?.rest;

/** Spawn inputs for machines that need one. */
const inputs: Partial<Record<MachineId, unknown>> = {
  'tool-call': { callId: 'c1', toolName: 'shell', arguments: {} },
  conversation: { conversationId: 'conv-1' },
  'agent-lifecycle': { agentId: 'a1', role: 'dev' },
  'autonomy-loop': { goal: 'ship it' },
  'circuit-breaker': { failureThreshold: 3, successThreshold: 1, openTimeoutMs: 1000 },
};

describe('restingStates', () => {
  it('names real machines, each entry one of its finite states', () => {
    for (const entry of restingStates) {
      expect(Object.hasOwn(machines, entry.machine), entry.machine).toBe(true);
      expect(machines[entry.machine].states, keyOf(entry)).toContain(entry.state);
    }
  });

  it("lists exactly each machine's terminal states as terminal", () => {
    const terminal = restingStates.filter((entry) => entry.rest === 'terminal').map(keyOf);
    expect(terminal.sort()).toEqual(finiteIds.flatMap((id) => machines[id].terminal.map((state) => `${id}/${state}`)).sort());
  });

  it('lists no state twice', () => {
    const keys = restingStates.map(keyOf);
    expect(keys.filter((key, i) => keys.indexOf(key) !== i)).toEqual([]);
  });

  it('gives every finite machine at least one resting state, and none to a data-state machine', () => {
    for (const id of finiteIds)
      expect(
        restingStates.some((entry) => entry.machine === id),
        id,
      ).toBe(true);
    expect(restingStates.filter((entry) => machines[entry.machine].states.length === 0)).toEqual([]);
  });

  it('says what each waiting state waits for, and nothing for the others', () => {
    for (const entry of restingStates) {
      if (entry.rest === 'waiting') expect(entry.waitsFor.length, keyOf(entry)).toBeGreaterThan(10);
      else expect('waitsFor' in entry, keyOf(entry)).toBe(false);
    }
  });

  it('lists the waiting states of issue 27 and DESIGN.md section 6', () => {
    const waiting = restingStates.filter((entry) => entry.rest === 'waiting').map(keyOf);
    expect(waiting).toEqual(
      expect.arrayContaining([
        'tool-call/awaiting_approval',
        'autonomy-loop/planning',
        'autonomy-loop/blocked',
        'agent-manager-session/waiting_approval',
        'agent-manager-session/waiting_input',
        'agent-manager-session/paused',
        'conversation/paused',
        'conversation/suspended',
        'chat-actor/paused',
      ]),
    );
  });

  it('leaves out every state where work is in progress or owed by the engine', () => {
    const working: Partial<Record<MachineId, string[]>> = {
      'turn-engine': ['streaming', 'tool_executing', 'completed', 'interrupted', 'error'],
      'tool-call': ['pending_call', 'executing'],
      'autonomy-loop': ['goal_received', 'executing', 'reviewing'],
      'agent-manager-session': ['creating', 'streaming'],
      conversation: ['closing'],
      'agent-lifecycle': ['spawning', 'running_turn'],
      archival: ['ARCHIVING', 'WRITING_TO_R2', 'COMPLETED', 'ERROR', 'RETRYING'],
      'chat-actor': ['running'],
      connection: ['CONNECTING', 'RECONNECTING'],
      'metrics-collector': ['INITIALIZING', 'ERROR', 'RECOVERING', 'ARCHIVING'],
      'agent-registration': ['REGISTERED', 'ACTIVATING', 'ERROR', 'RETRYING'],
    };
    for (const [machine, states] of Object.entries(working) as [MachineId, string[]][]) {
      for (const state of states) {
        expect(restingStates.map(keyOf), `${machine}/${state}`).not.toContain(`${machine}/${state}`);
        expect(restOf(machine, state), `${machine}/${state}`).toBeUndefined();
      }
    }
  });
});

describe('atRest', () => {
  it("returns each listed state's own entry, from the instance's state", () => {
    for (const entry of restingStates) {
      if (entry.when !== undefined) continue; // a condition: its own test below
      expect(atRest(entry.machine, stateAt(machines[entry.machine] as never, entry.state, {}, inputs[entry.machine])), keyOf(entry)).toBe(entry);
    }
  });

  it('follows a tool call from work to a wait for approval, and to its end', () => {
    let call = toolCall.initial({ callId: 'c1', toolName: 'shell', arguments: {} });
    expect(atRest('tool-call', call)).toBeUndefined();
    call = toolCall.transition(call, { type: 'requires_approval', policyReason: 'destructive' });
    expect(atRest('tool-call', call)).toMatchObject({ rest: 'waiting', waitsFor: expect.stringContaining('approval') });
    call = toolCall.transition(call, { type: 'approved' });
    expect(atRest('tool-call', call)).toBeUndefined();
    call = toolCall.transition(call, { type: 'success', output: 'done' });
    expect(atRest('tool-call', call)).toMatchObject({ state: 'completed_result', rest: 'terminal' });
  });

  it('has a plan in planning wait for approval once its plan is ready, not while its planner revises it', () => {
    const tasks = [{ id: 'build', description: 'Build it', dependsOn: [], priority: 0, ownerRole: 'dev' }];
    const fold = (state: AutonomyLoopState, events: AutonomyLoopEvent[]): AutonomyLoopState =>
      events.reduce((s, event) => {
        const next = autonomyLoop.transition(s, event);
        expect(next, `fixture event rejected: ${event.type}`).not.toBe(s);
        return next;
      }, state);
    const proposed = fold(autonomyLoop.initial({ goal: 'ship it' }), [{ type: 'decompose_goal', planId: 'p1', tasks }]);
    expect(atRest('autonomy-loop', proposed)).toMatchObject({ state: 'planning', rest: 'waiting', waitsFor: expect.stringContaining('plan_approved') });

    const replanning = fold(proposed, [
      { type: 'plan_approved' },
      { type: 'task_assigned', taskId: 'build', agentId: 'dev-1' },
      { type: 'task_started', taskId: 'build', turnNumber: 1 },
      { type: 'task_completed', taskId: 'build', outcome: 'success', result: 'built' },
      { type: 'all_tasks_terminal' },
      { type: 'needs_replan', findings: 'it does not ship' },
    ]);
    expect(replanning).toMatchObject({ value: 'planning', replanning: true });
    expect(atRest('autonomy-loop', replanning)).toBeUndefined();

    const revised = fold(replanning, [{ type: 'plan_revised', tasks }]);
    expect(atRest('autonomy-loop', revised)?.rest).toBe('waiting');
  });

  it('is undefined for a machine it does not know and for a state it cannot read, without throwing', () => {
    expect(atRest('lamp', { value: 'off' })).toBeUndefined();
    expect(atRest('conversation', null)).toBeUndefined();
    expect(atRest('conversation', { value: 7 })).toBeUndefined();
    expect(atRest('conversation', { value: 'nope' })).toBeUndefined();
    expect(atRest('react-agent', {})).toBeUndefined();
    expect(atRest('react-agent', { messages: [], reActContext: { toolCallIds: ['t1'] } })).toBeUndefined();
  });
});

describe('atRest of a ReAct agent (data state)', () => {
  let clock = 0;
  const at = () => ++clock;
  const apply = (state: AgentState, ...inputs: AgentInput[]): AgentState =>
    inputs.reduce((s, input) => {
      const next = agentTransition(input)(s);
      expect(next, `fixture input rejected: ${input.type}`).not.toBe(s);
      return next;
    }, state);
  const asked = () => apply(initialAgentState(), { type: 'user-message-received', messageId: 'm1', content: 'What is 6 x 7?', timestamp: at() });
  const answered = (state: AgentState, calledLlmAt: number, observation: Extract<AgentInput, { type: 're-act-observed' }>['observation']) =>
    apply(
      state,
      { type: 'llm-message-started', messageId: `a${calledLlmAt}`, timestamp: at() },
      { type: 'llm-message-completed', messageId: `a${calledLlmAt}`, content: 'Let me see.', timestamp: at() },
      { type: 're-act-observed', calledLlmAt, observation, timestamp: at() },
    );

  it('is at rest when fresh, as reactAgentRest', () => {
    expect(atRest('react-agent', initialAgentState())).toBe(reactAgentRest);
  });

  it('is not at rest after a user message: a model call is owed', () => {
    expect(atRest('react-agent', asked())).toBeUndefined();
  });

  it("is at rest again after the model's answer with no tool calls", () => {
    const state = asked();
    expect(atRest('react-agent', answered(state, state.updatedAt, { type: 'complete-re-act' }))).toBe(reactAgentRest);
  });

  it('is not at rest while a tool call of its loop is unanswered, nor once answered (the model is owed its result)', () => {
    const state = asked();
    const calling = answered(state, state.updatedAt, { type: 'continue-re-act', toolCalls: { t1: { name: 'multiply', parameters: '{"a":6,"b":7}', calledAt: at() } } });
    expect(atRest('react-agent', calling)).toBeUndefined();
    const result = apply(calling, { type: 'tool-call-completed', toolCallId: 't1', result: { isSuccess: true, content: '42', receivedAt: 0 }, timestamp: at() });
    expect(atRest('react-agent', result)).toBeUndefined();
    expect(atRest('react-agent', answered(result, result.updatedAt, { type: 'complete-re-act' }))).toBe(reactAgentRest);
  });

  it('is not at rest with an answer left streaming, though no model call is owed', () => {
    const state = asked();
    const streaming = apply(
      state,
      { type: 'llm-message-started', messageId: 'a1', timestamp: at() },
      { type: 're-act-observed', calledLlmAt: state.updatedAt, observation: { type: 'complete-re-act' }, timestamp: at() },
    );
    expect(streaming.reActContext).toBeNull();
    expect(atRest('react-agent', streaming)).toBeUndefined();
  });
});
