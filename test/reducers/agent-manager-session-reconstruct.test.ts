import { describe, expect, it } from 'vitest';
import { AgentManagerSessionState, reconstructAgentManagerState, type AgentManagerPersistedSession } from '../../src/index.js';

type StateName = AgentManagerSessionState['value'];
const both = [true, false];

/** Every rule of seed 001 "State Persistence" as DESIGN.md resolves it. */
const rules: Array<{ persisted: AgentManagerPersistedSession; expected: StateName }> = [
  { persisted: { status: 'creating', processRunning: true }, expected: 'creating' },
  { persisted: { status: 'creating', processRunning: false }, expected: 'error' },
  ...both.map((processRunning) => ({ persisted: { status: 'stopped' as const, processRunning }, expected: 'stopped' as const })),
  ...both.map((processRunning) => ({ persisted: { status: 'error' as const, processRunning }, expected: 'error' as const })),
  ...both.map((processRunning) => ({ persisted: { status: 'done' as const, processRunning }, expected: 'completed' as const })),
  ...both.map((processRunning) => ({
    persisted: { status: 'done' as const, lastAsk: 'followup', processRunning },
    expected: 'completed' as const,
  })),
  ...both.map((processRunning) => ({
    persisted: { status: 'done' as const, lastAsk: 'resume_completed_task', processRunning },
    expected: 'paused' as const,
  })),
  ...(
    [
      ['tool', 'waiting_approval'],
      ['command', 'waiting_approval'],
      ['browser_action_launch', 'waiting_approval'],
      ['use_mcp_server', 'waiting_approval'],
      ['followup', 'waiting_input'],
      ['completion_result', 'completed'],
      ['api_req_failed', 'error'],
      ['mistake_limit_reached', 'error'],
      ['invalid_model', 'error'],
      ['payment_required_prompt', 'error'],
      ['resume_task', 'paused'],
      ['resume_completed_task', 'paused'],
    ] as const
  ).flatMap(([lastAsk, expected]) => both.map((processRunning) => ({ persisted: { status: 'running' as const, lastAsk, processRunning }, expected }))),
  // No ask, or one that does not stop the agent: working while the process runs, else interrupted.
  { persisted: { status: 'running', processRunning: true }, expected: 'streaming' },
  { persisted: { status: 'running', processRunning: false }, expected: 'paused' },
  { persisted: { status: 'running', lastAsk: 'command_output', processRunning: true }, expected: 'streaming' },
  { persisted: { status: 'running', lastAsk: 'condense', processRunning: false }, expected: 'paused' },
];

describe('reconstructAgentManagerState: seed 001 "State Persistence"', () => {
  it.each(rules)('$persisted -> $expected', ({ persisted, expected }) => {
    const state = reconstructAgentManagerState(persisted);
    expect(state.value).toBe(expected);
    expect(AgentManagerSessionState.safeParse(state).success).toBe(true);
    expect(state.lastAsk).toBe(persisted.lastAsk);
  });

  it('carries auto-approve from the input, and marks a session past creating as started', () => {
    expect(reconstructAgentManagerState({ status: 'running', processRunning: true }, { autoApprove: true })).toEqual({
      value: 'streaming',
      autoApprove: true,
      sessionCreated: true,
      apiReqStarted: true,
    });
    expect(reconstructAgentManagerState({ status: 'creating', processRunning: true })).toEqual({
      value: 'creating',
      autoApprove: false,
      sessionCreated: false,
      apiReqStarted: false,
    });
  });

  // Seed 001 "Auto-Approve Mode": `waiting_approval` is transient, so a reload never lands in it.
  const approvalAsks = ['tool', 'command', 'browser_action_launch', 'use_mcp_server'] as const;
  it.each(approvalAsks.flatMap((lastAsk) => both.map((processRunning) => ({ lastAsk, processRunning }))))(
    'auto-approve: running after ask:$lastAsk (process running: $processRunning) does not wait for approval',
    ({ lastAsk, processRunning }) => {
      const state = reconstructAgentManagerState({ status: 'running', lastAsk, processRunning }, { autoApprove: true });
      expect(state).toEqual({ value: processRunning ? 'streaming' : 'paused', autoApprove: true, sessionCreated: true, apiReqStarted: true, lastAsk });
      // The same persisted row without auto-approve waits, so the mode is what decides.
      expect(reconstructAgentManagerState({ status: 'running', lastAsk, processRunning }, { autoApprove: false }).value).toBe('waiting_approval');
    },
  );

  it('auto-approve changes nothing for asks that are not approvals', () => {
    for (const { persisted, expected } of rules.filter(({ persisted }) => !approvalAsks.some((ask) => ask === persisted.lastAsk))) {
      expect(reconstructAgentManagerState(persisted, { autoApprove: true }).value).toBe(expected);
    }
  });

  it('throws an error naming each invalid field', () => {
    expect(() => reconstructAgentManagerState({ status: 'paused', processRunning: 'yes' } as never)).toThrowErrorMatchingInlineSnapshot(
      `[Error: invalid persisted agent manager session: status: Invalid option: expected one of "creating"|"running"|"done"|"error"|"stopped"; processRunning: Invalid input: expected boolean, received string]`,
    );
    expect(() => reconstructAgentManagerState(null as never)).toThrowErrorMatchingInlineSnapshot(
      `[Error: invalid persisted agent manager session: (root): Invalid input: expected object, received null]`,
    );
  });
});
