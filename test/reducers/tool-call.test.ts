import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { edgesOf, stepUnknown, toolCall, toolCallStatus, type Edge, type ToolCallEvent, type ToolCallInput, type ToolCallState } from '../../src/index.js';
import { checkMachineProperties, expectRow, expectTerminalsAbsorb, stateAt } from '../support/machine-properties.js';
import { drawnEdges, eventsBeforeParens, expectRuneKind, missingDrawnEdges, readSeed, runeKindRows } from '../support/seed-diagram.js';

type Name = ToolCallState['value'];
const seed = readSeed('003_4203c785f6246465.txt');
const input: ToolCallInput = { callId: 'call-1', toolName: 'shell', arguments: { cmd: 'ls -la' } };
const at = (value: Name, context: Partial<ToolCallState> = {}) => stateAt(toolCall, value, context, input);

const samples: ToolCallEvent[] = [
  { type: 'requires_approval', policyReason: 'shell is gated' },
  { type: 'auto_approved' },
  { type: 'no_approval_needed' },
  { type: 'approved', approver: 'ana' },
  { type: 'denied', reason: 'too risky' },
  { type: 'approval_timeout' },
  { type: 'execution_claimed', claim: 'run-1' },
  { type: 'progress_update', chunk: 'line 1\n' },
  { type: 'success', output: { files: 3 } },
  { type: 'execution_error', error: 'exit 2' },
  { type: 'execution_timeout' },
  { type: 'cancelled', reason: 'turn interrupted' },
];

describe('toolCall: seed 003 diagram, edge by edge', () => {
  const rows: Array<[Name, ToolCallEvent, Name, string]> = [
    ['pending_call', { type: 'requires_approval' }, 'awaiting_approval', 'tool.approval_requested'],
    ['pending_call', { type: 'auto_approved' }, 'executing', 'tool.approved'],
    ['pending_call', { type: 'no_approval_needed' }, 'executing', 'no_approval_needed'],
    ['awaiting_approval', { type: 'approved', approver: 'ana' }, 'executing', 'tool.approved'],
    ['awaiting_approval', { type: 'denied' }, 'denied', 'tool.denied'],
    ['awaiting_approval', { type: 'approval_timeout' }, 'timeout_result', 'tool.result'],
    ['executing', { type: 'progress_update', chunk: 'x' }, 'executing', 'tool.progress'],
    ['executing', { type: 'success', output: null }, 'completed_result', 'tool.result'],
    ['executing', { type: 'execution_error', error: 'exit 2' }, 'error_result', 'tool.result'],
    ['executing', { type: 'execution_timeout' }, 'timeout_result', 'tool.result'],
    ['executing', { type: 'cancelled' }, 'cancelled_result', 'tool.result'],
  ];
  it.each(rows)('%s + %o -> %s (%s)', (from, event, to, kind) => {
    expectRow(toolCall, at(from), event, to, kind);
  });

  it('every drawn transition is in the table', () => {
    const drawn = drawnEdges(seed, '## Tool Lifecycle State Machine');
    expect(drawn.length).toBe(10);
    expect(missingDrawnEdges(edgesOf(toolCall), drawn, eventsBeforeParens)).toEqual([]);
  });
});

describe('toolCall: seed 003 "Tool Events (Rune Kinds)"', () => {
  const heading = '### Tool Events (Rune Kinds)';
  // The seed's rows, each with the edges it names; a state row names the edges into that state.
  const rows: Array<[string, string, Partial<Edge> | 'spawn']> = [
    ['pending_call', 'tool.call', 'spawn'],
    ['awaiting_approval', 'tool.approval_requested', { to: 'awaiting_approval' }],
    ['approved', 'tool.approved', { on: 'approved' }],
    ['denied', 'tool.denied', { to: 'denied' }],
    ['executing (progress)', 'tool.progress', { from: 'executing', on: 'progress_update' }],
    ['completed_result', 'tool.result', { to: 'completed_result' }],
    ['error_result', 'tool.result', { to: 'error_result' }],
    ['timeout_result', 'tool.result', { to: 'timeout_result' }],
    ['cancelled_result', 'tool.result', { to: 'cancelled_result' }],
  ];

  it('lists exactly the seed table', () => {
    expect(runeKindRows(seed, heading)).toEqual(rows.map(([where, kind]) => [where, kind]));
  });

  it.each(rows)('%s: %s', (_, kind, where) => {
    expectRuneKind(toolCall, where, kind);
  });

  it('auto_approved is a tool.approved too; no_approval_needed keeps its event type', () => {
    const kinds = Object.fromEntries(
      edgesOf(toolCall)
        .filter((e) => e.from === 'pending_call')
        .map((e) => [e.on, e.kind]),
    );
    expect(kinds).toMatchObject({ auto_approved: 'tool.approved', no_approval_needed: 'no_approval_needed' });
  });
});

describe('toolCall: context and status', () => {
  it('starts pending with the call in its context', () => {
    expect(toolCall.initial(input)).toEqual({ value: 'pending_call', ...input, progressCount: 0 });
  });

  it('counts progress without keeping the chunks', () => {
    let s = toolCall.transition(at('pending_call'), { type: 'no_approval_needed' });
    for (const chunk of ['a'.repeat(1000), 'b'.repeat(1000)]) s = toolCall.transition(s, { type: 'progress_update', chunk });
    expect(s).toEqual({ value: 'executing', ...input, progressCount: 2 });
  });

  it('records the approval, the denial and the outcome', () => {
    const waiting = toolCall.transition(at('pending_call'), { type: 'requires_approval', policyReason: 'shell is gated' });
    const approved = toolCall.transition(waiting, { type: 'approved', approver: 'ana' });
    expect(approved).toMatchObject({ value: 'executing', policyReason: 'shell is gated', approver: 'ana' });
    expect(toolCall.transition(approved, { type: 'success', output: ['a.txt'] })).toMatchObject({ output: ['a.txt'] });
    expect(toolCall.transition(approved, { type: 'execution_error', error: 'exit 2' })).toMatchObject({ error: 'exit 2' });
    expect(toolCall.transition(at('awaiting_approval'), { type: 'denied', reason: 'too risky' })).toMatchObject({
      value: 'denied',
      reason: 'too risky',
    });
  });

  it.each([
    ['pending_call', undefined],
    ['awaiting_approval', undefined],
    ['executing', undefined],
    ['denied', 'denied'],
    ['completed_result', 'success'],
    ['error_result', 'error'],
    ['timeout_result', 'timeout'],
    ['cancelled_result', 'cancelled'],
  ] as const)('toolCallStatus(%s) is %s', (value, status) => {
    expect(toolCallStatus(at(value))).toBe(status);
  });

  it('has a status exactly in the terminal states', () => {
    for (const value of toolCall.states) {
      expect(toolCallStatus({ value: value as Name }) !== undefined).toBe(toolCall.terminal.includes(value));
    }
  });
});

describe('toolCall: extension', () => {
  it.each(['pending_call', 'awaiting_approval'] as const)('cancelled in %s ends the call with a tool.result', (from) => {
    const step = toolCall.step(at(from), { type: 'cancelled', reason: 'turn interrupted' });
    expect(step).toMatchObject({ accepted: true, kind: 'tool.result', state: { value: 'cancelled_result', reason: 'turn interrupted' } });
    const edge = edgesOf(toolCall).find((e) => e.from === from && e.on === 'cancelled');
    expect(edge).toMatchObject({ source: 'extension', note: expect.stringContaining('orphan tool call') });
  });
});

describe('toolCall: the execution claim (extension)', () => {
  const executing = at('executing');
  const notClaimable = 'event "execution_claimed" is not allowed in state "executing": it needs an unclaimed call, or supersedes naming its current claim';

  it('an unclaimed call takes one claim: tool.claimed, attempt 1, the call stays executing', () => {
    const step = toolCall.step(executing, { type: 'execution_claimed', claim: 'run-a' });
    expect(step).toEqual({
      accepted: true,
      kind: 'tool.claimed',
      state: { ...executing, claim: 'run-a', attempt: 1 },
      payload: { callId: 'call-1', claim: 'run-a', attempt: 1, supersedes: undefined },
    });
    expect(toolCall.schemas.state.parse(step.state)).toEqual(step.state);
    const edge = edgesOf(toolCall).find((e) => e.on === 'execution_claimed');
    expect(edge).toMatchObject({ from: 'executing', to: 'executing', source: 'extension', note: expect.stringContaining('before its tool starts') });
  });

  it('a second claim is refused, whoever makes it (the same runner too), with the reason', () => {
    const claimed = toolCall.transition(executing, { type: 'execution_claimed', claim: 'run-a' });
    for (const claim of ['run-b', 'run-a']) {
      expect(toolCall.step(claimed, { type: 'execution_claimed', claim })).toEqual({ accepted: false, state: claimed, code: 'not_allowed', reason: notClaimable });
    }
  });

  it('a re-run after a takeover supersedes the current claim: attempt 2; a second survivor naming the same old claim is refused', () => {
    const claimed = toolCall.transition(executing, { type: 'execution_claimed', claim: 'run-a' });
    const first = toolCall.step(claimed, { type: 'execution_claimed', claim: 'run-b', supersedes: 'run-a' });
    expect(first).toMatchObject({ accepted: true, kind: 'tool.claimed', state: { claim: 'run-b', attempt: 2 }, payload: { claim: 'run-b', attempt: 2, supersedes: 'run-a' } });
    const second = toolCall.step(first.state, { type: 'execution_claimed', claim: 'run-c', supersedes: 'run-a' });
    expect(second).toEqual({ accepted: false, state: first.state, code: 'not_allowed', reason: notClaimable });
  });

  it('a claim naming a claim the call does not have is refused: on an unclaimed call, or naming another', () => {
    expect(toolCall.transition(executing, { type: 'execution_claimed', claim: 'run-b', supersedes: 'run-a' })).toBe(executing);
    const claimed = toolCall.transition(executing, { type: 'execution_claimed', claim: 'run-a' });
    expect(toolCall.transition(claimed, { type: 'execution_claimed', claim: 'run-c', supersedes: 'run-x' })).toBe(claimed);
  });

  it('only an executing call is claimed: pending or awaiting approval it is refused, terminal it is "terminal state"', () => {
    for (const value of ['pending_call', 'awaiting_approval'] as const) {
      expect(toolCall.step(at(value), { type: 'execution_claimed', claim: 'run-a' })).toMatchObject({
        accepted: false,
        code: 'not_allowed',
        reason: `event "execution_claimed" is not allowed in state "${value}"`,
      });
    }
    expect(toolCall.step(at('completed_result'), { type: 'execution_claimed', claim: 'run-a' })).toMatchObject({ accepted: false, reason: 'terminal state' });
  });

  it('a claim id is bounded: empty or over 128 characters fails the schema', () => {
    expect(stepUnknown(toolCall, executing, { type: 'execution_claimed', claim: '' })).toMatchObject({ accepted: false, code: 'invalid_event' });
    const long = stepUnknown(toolCall, executing, { type: 'execution_claimed', claim: 'x'.repeat(129) });
    expect(!long.accepted && long.reason).toMatchInlineSnapshot(`"invalid "execution_claimed" event: claim: Too big: expected string to have <=128 characters"`);
    expect(stepUnknown(toolCall, executing, { type: 'execution_claimed', claim: 'x'.repeat(128) })).toMatchObject({ accepted: true });
  });
});

describe('toolCall: rejections', () => {
  it('every terminal state rejects every event with "terminal state"', () => {
    expectTerminalsAbsorb(toolCall, samples, input);
  });

  it('does not execute a call that awaits approval', () => {
    const waiting = at('awaiting_approval');
    for (const type of ['auto_approved', 'no_approval_needed'] as const) {
      expect(toolCall.step(waiting, { type })).toEqual({
        accepted: false,
        state: waiting,
        code: 'not_allowed',
        reason: `event "${type}" is not allowed in state "awaiting_approval"`,
      });
    }
    expect(toolCall.transition(waiting, { type: 'progress_update', chunk: 'x' })).toBe(waiting);
    expect(toolCall.transition(waiting, { type: 'success', output: 1 })).toBe(waiting);
  });
});

describe('toolCall: bad input', () => {
  it('names the field of an event that fails its schema', () => {
    const step = stepUnknown(toolCall, at('executing'), { type: 'progress_update', chunk: 42 });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(`"invalid "progress_update" event: chunk: Invalid input: expected string, received number"`);
  });

  it('rejects an output that is not JSON', () => {
    const step = stepUnknown(toolCall, at('executing'), { type: 'success', output: () => 'x' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(`"invalid "success" event: output: Invalid input"`);
  });

  it('rejects an unknown event type by name', () => {
    const step = stepUnknown(toolCall, at('pending_call'), { type: 'approve' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"unknown event type "approve" for machine "tool-call"; expected one of: requires_approval, auto_approved, no_approval_needed, approved, denied, approval_timeout, execution_claimed, progress_update, success, execution_error, execution_timeout, cancelled"`,
    );
  });

  it('checks the spawn input', () => {
    expect(toolCall.schemas.input.safeParse({ callId: '', toolName: 'shell', arguments: {} }).success).toBe(false);
    expect(toolCall.schemas.input.safeParse({ callId: 'c', toolName: 'shell' }).success).toBe(false);
    expect(toolCall.schemas.input.safeParse({ callId: 'c', toolName: 'shell', arguments: null }).success).toBe(true);
  });
});

describe('toolCall: properties', () => {
  const text = fc.string({ maxLength: 12 });
  const json = fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<ToolCallInput['arguments']>;
  const event: fc.Arbitrary<ToolCallEvent> = fc.oneof(
    fc.record({ type: fc.constant('requires_approval' as const), policyReason: text }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'auto_approved' as const }),
    fc.constant({ type: 'no_approval_needed' as const }),
    fc.record({ type: fc.constant('approved' as const), approver: text }, { requiredKeys: ['type'] }),
    fc.record({ type: fc.constant('denied' as const), reason: text }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'approval_timeout' as const }),
    fc.record(
      { type: fc.constant('execution_claimed' as const), claim: fc.constantFrom('run-1', 'run-2'), supersedes: fc.constantFrom('run-1', 'run-2') },
      { requiredKeys: ['type', 'claim'] },
    ),
    text.map((chunk) => ({ type: 'progress_update' as const, chunk })),
    json.map((output) => ({ type: 'success' as const, output })),
    text.map((error) => ({ type: 'execution_error' as const, error })),
    fc.constant({ type: 'execution_timeout' as const }),
    fc.record({ type: fc.constant('cancelled' as const), reason: text }, { requiredKeys: ['type'] }),
  );
  const inputs: fc.Arbitrary<ToolCallInput> = fc.record({
    callId: fc.string({ minLength: 1, maxLength: 8 }),
    toolName: fc.string({ minLength: 1, maxLength: 8 }),
    arguments: json,
  });

  it('random event sequences keep every machine property; the call is kept, progress only counts, a claim replaces only the one it names', () => {
    checkMachineProperties(toolCall, {
      event,
      input: inputs,
      onAccepted: (prev, e, next) => {
        expect([next.callId, next.toolName, next.arguments]).toEqual([prev.callId, prev.toolName, prev.arguments]);
        expect(next.progressCount).toBe(prev.progressCount + (e.type === 'progress_update' ? 1 : 0));
        if (e.type === 'execution_claimed') {
          expect(e.supersedes).toBe(prev.claim);
          expect([next.claim, next.attempt]).toEqual([e.claim, (prev.attempt ?? 0) + 1]);
        } else expect([next.claim, next.attempt]).toEqual([prev.claim, prev.attempt]);
      },
    });
  });
});
