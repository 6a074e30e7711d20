import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { agentRegistration, edgesOf, stepUnknown, type AgentRegistrationEvent, type AgentRegistrationState } from '../../src/index.js';
import { checkMachineProperties, expectRow, expectTerminalsAbsorb, stateAt } from '../support/machine-properties.js';
import { drawnEdges, eventsByLabel, missingDrawnEdges, readSeed } from '../support/seed-diagram.js';

const at = (value: AgentRegistrationState['value'], context: Partial<AgentRegistrationState> = {}) => stateAt(agentRegistration, value, context);

const samples: AgentRegistrationEvent[] = [
  { type: 'register' },
  { type: 'init_succeeded' },
  { type: 'init_failed', error: 'no API key' },
  { type: 'pause', reason: 'rate limited' },
  { type: 'resume' },
  { type: 'remove' },
  { type: 'retry_init' },
  { type: 'retry_succeeded' },
  { type: 'retry_failed', error: 'still no API key' },
  { type: 'redefine', definition: { name: 'coder', model: 'main', tools: [], mcpServers: {} } },
];

describe('agentRegistration: seed 002 diagram 3, edge by edge', () => {
  const rows: Array<[AgentRegistrationState['value'], AgentRegistrationEvent, AgentRegistrationState['value']]> = [
    ['REGISTERED', { type: 'register' }, 'ACTIVATING'],
    ['ACTIVATING', { type: 'init_succeeded' }, 'ACTIVE'],
    ['ACTIVATING', { type: 'init_failed', error: 'no API key' }, 'ERROR'],
    ['ACTIVE', { type: 'pause', reason: 'admin' }, 'PAUSED'],
    ['PAUSED', { type: 'resume' }, 'ACTIVE'],
    ['ACTIVE', { type: 'remove' }, 'DECOMMISSIONED'],
    ['ERROR', { type: 'retry_init' }, 'RETRYING'],
    ['RETRYING', { type: 'retry_succeeded' }, 'ACTIVE'],
    ['RETRYING', { type: 'retry_failed' }, 'DECOMMISSIONED'],
  ];
  it.each(rows)('%s + %o -> %s', (from, event, to) => {
    expectRow(agentRegistration, at(from), event, to);
  });

  it('every transition drawn in the seed is in the table', () => {
    const drawn = drawnEdges(readSeed('002_2417c8b666a13ea4.txt'), '## 3) Agent Lifecycle');
    expect(drawn).toHaveLength(9);
    const labelToEvents: Record<string, string[]> = {
      register: ['register'],
      'init successful': ['init_succeeded'],
      'init failed': ['init_failed'],
      'admin pause or rate limiting': ['pause'],
      resume: ['resume'],
      remove: ['remove'],
      'retry init': ['retry_init'],
      success: ['retry_succeeded'],
      'repeated failure': ['retry_failed'],
    };
    expect(missingDrawnEdges(edgesOf(agentRegistration), drawn, eventsByLabel(labelToEvents))).toEqual([]);
  });
});

describe('agentRegistration: context and rejections', () => {
  it('keeps why the agent paused or failed, and clears it when it is ACTIVE again', () => {
    const paused = agentRegistration.transition(at('ACTIVE'), { type: 'pause', reason: 'rate limited' });
    expect(paused).toEqual({ value: 'PAUSED', reason: 'rate limited' });
    expect(agentRegistration.transition(paused, { type: 'resume' })).toEqual({ value: 'ACTIVE' });

    const failed = agentRegistration.transition(at('ACTIVATING'), { type: 'init_failed', error: 'no API key' });
    expect(failed).toEqual({ value: 'ERROR', error: 'no API key' });
    const retrying = agentRegistration.transition(failed, { type: 'retry_init' });
    expect(retrying).toEqual({ value: 'RETRYING', error: 'no API key', attempts: 1 });
    expect(agentRegistration.transition(retrying, { type: 'retry_succeeded' })).toEqual({ value: 'ACTIVE' });
    expect(agentRegistration.transition(retrying, { type: 'retry_failed', error: 'quota' })).toEqual({ value: 'DECOMMISSIONED', error: 'quota', attempts: 1 });
    // A final failure that says nothing keeps the error already known.
    expect(agentRegistration.transition(retrying, { type: 'retry_failed' })).toEqual({ value: 'DECOMMISSIONED', error: 'no API key', attempts: 1 });
  });

  it('extension rows: a retry that fails with attempts left goes back to ERROR; a changed definition is checked again from ACTIVATING', () => {
    const retrying = at('RETRYING', { error: 'no API key', attempts: 1 });
    expect(agentRegistration.transition(retrying, { type: 'init_failed', error: 'quota' })).toEqual({ value: 'ERROR', error: 'quota', attempts: 1 });
    const definition = { name: 'coder', model: 'main', tools: ['clock'], mcpServers: {} };
    for (const from of ['REGISTERED', 'ACTIVE', 'PAUSED', 'ERROR'] as const) {
      expect(agentRegistration.transition(at(from, { error: 'old', attempts: 2, reason: 'admin' }), { type: 'redefine', definition })).toEqual({
        value: 'ACTIVATING',
        definition,
      });
    }
    expect(agentRegistration.step(at('ACTIVATING'), { type: 'redefine', definition }).accepted).toBe(false);
  });

  it('DECOMMISSIONED rejects every event with "terminal state"', () => {
    expect(agentRegistration.terminal).toEqual(['DECOMMISSIONED']);
    expectTerminalsAbsorb(agentRegistration, samples);
  });

  it('the table has no row from a terminal state', () => {
    for (const edge of edgesOf(agentRegistration)) expect(agentRegistration.terminal).not.toContain(edge.from);
  });

  it('rejects an event that does not apply with the same object and a reason', () => {
    const paused = at('PAUSED');
    expect(agentRegistration.step(paused, { type: 'remove' })).toEqual({
      accepted: false,
      state: paused,
      code: 'not_allowed',
      reason: 'event "remove" is not allowed in state "PAUSED"',
    });
    const error = at('ERROR');
    expect(agentRegistration.transition(error, { type: 'resume' })).toBe(error);
  });
});

describe('agentRegistration: bad input', () => {
  it('names the field of an event that fails its schema', () => {
    const step = stepUnknown(agentRegistration, at('ACTIVE'), { type: 'pause', reason: ['admin'] });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(`"invalid "pause" event: reason: Invalid input: expected string, received array"`);
  });

  it('rejects an unknown event type by name', () => {
    const step = stepUnknown(agentRegistration, at('ACTIVE'), { type: 'activate' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"unknown event type "activate" for machine "agent-registration"; expected one of: register, init_succeeded, init_failed, pause, resume, remove, retry_init, retry_succeeded, retry_failed, redefine"`,
    );
  });
});

describe('agentRegistration: properties', () => {
  const error = fc.option(fc.string(), { nil: undefined });
  const event: fc.Arbitrary<AgentRegistrationEvent> = fc.oneof(
    fc.constant({ type: 'register' as const }),
    fc.constant({ type: 'init_succeeded' as const }),
    error.map((e) => (e === undefined ? { type: 'init_failed' as const } : { type: 'init_failed' as const, error: e })),
    fc.option(fc.string(), { nil: undefined }).map((r) => (r === undefined ? { type: 'pause' as const } : { type: 'pause' as const, reason: r })),
    fc.constant({ type: 'resume' as const }),
    fc.constant({ type: 'remove' as const }),
    fc.constant({ type: 'retry_init' as const }),
    fc.constant({ type: 'retry_succeeded' as const }),
    error.map((e) => (e === undefined ? { type: 'retry_failed' as const } : { type: 'retry_failed' as const, error: e })),
  );
  it('random event sequences keep every machine property; only PAUSED carries a reason', () => {
    checkMachineProperties(agentRegistration, {
      event,
      onAccepted: (_, __, next) => {
        if (next.value !== 'PAUSED') expect(next.reason).toBeUndefined();
        if (next.value === 'ACTIVE') expect(next.error).toBeUndefined();
      },
    });
  });
});
