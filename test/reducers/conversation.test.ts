import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NO_USAGE, conversation, edgesOf, stepUnknown, type ConversationEvent, type ConversationInput, type ConversationState, type Edge } from '../../src/index.js';
import { checkMachineProperties, expectNeverThrows, expectNotAllowed, expectRow, expectTerminalsAbsorb, stateAt } from '../support/machine-properties.js';
import { drawnEdges, eventsBeforeParens, expectRuneKind, missingDrawnEdges, readSeed, runeKindRows } from '../support/seed-diagram.js';

type Name = ConversationState['value'];
const seed = readSeed('003_4203c785f6246465.txt');
const input: ConversationInput = { conversationId: 'conv-1', config: { model: 'opus', maxTurns: 20 } };
const at = (value: Name, context: Partial<ConversationState> = {}) => stateAt(conversation, value, context, input);

const samples: ConversationEvent[] = [
  { type: 'first_message' },
  { type: 'agent_ready', rootAgentId: 'agent-1' },
  { type: 'new_turn' },
  { type: 'turn_completed' },
  { type: 'pause_requested', reason: 'lunch' },
  { type: 'resume_requested' },
  { type: 'budget_exhausted', reason: 'token budget', budgetInfo: { used: 100_000 } },
  { type: 'error_threshold', reason: '5 errors' },
  { type: 'budget_replenished' },
  { type: 'reset' },
  { type: 'close_requested', reason: 'done' },
  { type: 'cleanup_complete', finalStats: { turns: 3 } },
  { type: 'archive_requested' },
];

describe('conversation: seed 003 diagram, edge by edge', () => {
  const rows: Array<[Name, ConversationEvent, Name, string]> = [
    ['created', { type: 'first_message' }, 'active', 'session.activated'],
    ['created', { type: 'agent_ready', rootAgentId: 'agent-1' }, 'active', 'session.activated'],
    ['active', { type: 'new_turn' }, 'active', 'new_turn'],
    ['active', { type: 'turn_completed' }, 'active', 'turn_completed'],
    ['active', { type: 'pause_requested' }, 'paused', 'session.paused'],
    ['active', { type: 'budget_exhausted' }, 'suspended', 'session.suspended'],
    ['active', { type: 'error_threshold' }, 'suspended', 'session.suspended'],
    ['active', { type: 'close_requested' }, 'closing', 'session.closing'],
    ['paused', { type: 'resume_requested' }, 'active', 'session.resumed'],
    ['paused', { type: 'close_requested' }, 'closing', 'session.closing'],
    ['suspended', { type: 'budget_replenished' }, 'active', 'session.unsuspended'],
    ['suspended', { type: 'reset' }, 'active', 'session.unsuspended'],
    ['suspended', { type: 'close_requested' }, 'closing', 'session.closing'],
    ['closing', { type: 'cleanup_complete' }, 'closed', 'session.closed'],
    ['closed', { type: 'archive_requested' }, 'archived', 'archive_requested'],
  ];
  it.each(rows)('%s + %o -> %s (%s)', (from, event, to, kind) => {
    expectRow(conversation, at(from), event, to, kind);
  });

  it('every drawn transition is in the table', () => {
    const drawn = drawnEdges(seed, '## Session (Conversation) Lifecycle State Machine');
    expect(drawn.length).toBe(11);
    expect(missingDrawnEdges(edgesOf(conversation), drawn, eventsBeforeParens)).toEqual([]);
  });
});

describe('conversation: seed 003 "Session Events (Rune Kinds)"', () => {
  const heading = '### Session Events (Rune Kinds)';
  const rows: Array<[string, string, Partial<Edge> | 'spawn']> = [
    ['[*] -> created', 'session.created', 'spawn'],
    ['created -> active', 'session.activated', { from: 'created', to: 'active' }],
    ['active -> paused', 'session.paused', { from: 'active', to: 'paused' }],
    ['paused -> active', 'session.resumed', { from: 'paused', to: 'active' }],
    ['active -> suspended', 'session.suspended', { from: 'active', to: 'suspended' }],
    ['suspended -> active', 'session.unsuspended', { from: 'suspended', to: 'active' }],
    ['* -> closing', 'session.closing', { to: 'closing', on: 'close_requested' }],
    ['closing -> closed', 'session.closed', { from: 'closing', to: 'closed' }],
  ];

  it('lists exactly the seed table', () => {
    expect(runeKindRows(seed, heading)).toEqual(rows.map(([where, kind]) => [where, kind]));
  });

  it.each(rows)('%s: %s', (_, kind, where) => {
    expectRuneKind(conversation, where, kind);
  });

  it('"* -> closing" closes from every state before closing, created included', () => {
    const froms = edgesOf(conversation)
      .filter((e) => e.to === 'closing' && e.from !== 'closing') // entering closing; a turn ending while closing stays there
      .map((e) => e.from);
    expect(froms.sort()).toEqual(['active', 'created', 'paused', 'suspended']);
    expect(conversation.step(at('created'), { type: 'close_requested', reason: 'never used' })).toMatchObject({
      accepted: true,
      kind: 'session.closing',
      state: { value: 'closing', reason: 'never used' },
    });
  });
});

describe('conversation: context', () => {
  it('starts created with the spawn input', () => {
    expect(conversation.initial(input)).toEqual({ value: 'created', ...input, usage: NO_USAGE });
    expect(conversation.initial({})).toEqual({ value: 'created', usage: NO_USAGE });
  });

  it('folds a whole life into its context', () => {
    const events: ConversationEvent[] = [
      { type: 'agent_ready', rootAgentId: 'agent-1' },
      { type: 'new_turn' },
      { type: 'turn_completed', usage: { ...NO_USAGE, inputTokens: 60_000, modelCalls: 1 } },
      { type: 'new_turn' },
      { type: 'turn_completed', usage: { ...NO_USAGE, inputTokens: 40_000, modelCalls: 2, cost: 1.5 } },
      { type: 'budget_exhausted', reason: 'token budget', budgetInfo: { used: 100_000, limit: 100_000 } },
    ];
    const suspended = events.reduce((s, e) => conversation.transition(s, e), conversation.initial(input));
    expect(suspended).toEqual({
      value: 'suspended',
      ...input,
      rootAgentId: 'agent-1',
      turns: 2,
      reason: 'token budget',
      budgetInfo: { used: 100_000, limit: 100_000 },
      usage: { ...NO_USAGE, inputTokens: 100_000, modelCalls: 3, cost: 1.5 },
    });
    const resumed = conversation.transition(suspended, { type: 'budget_replenished' });
    expect(resumed).toEqual({ value: 'active', ...input, rootAgentId: 'agent-1', turns: 2, usage: suspended.usage });
    // A replenish with new limits keeps them; the usage keeps counting.
    const raised = conversation.transition(conversation.transition(resumed, { type: 'budget_exhausted' }), { type: 'budget_replenished', budget: { inputTokens: 200_000 } });
    expect(raised).toMatchObject({ value: 'active', budget: { inputTokens: 200_000 }, usage: suspended.usage });
    expect(conversation.transition(conversation.transition(raised, { type: 'budget_exhausted' }), { type: 'budget_replenished' }).budget).toEqual({ inputTokens: 200_000 });
    const closed = [
      { type: 'close_requested', reason: 'user left' },
      { type: 'cleanup_complete', finalStats: { turns: 2 } },
    ].reduce((s, e) => conversation.transition(s, e as ConversationEvent), resumed);
    expect(closed).toMatchObject({ value: 'closed', reason: 'user left', finalStats: { turns: 2 } });
  });

  it('clears the pause reason on resume', () => {
    const paused = conversation.transition(at('active'), { type: 'pause_requested', reason: 'lunch' });
    expect(paused.reason).toBe('lunch');
    expect(conversation.transition(paused, { type: 'resume_requested' }).reason).toBeUndefined();
  });
});

describe('conversation: extension', () => {
  it.each(['paused', 'suspended'] as const)('the turn in flight still completes in %s', (from) => {
    const state = at(from);
    const step = conversation.step(state, { type: 'turn_completed' });
    expect(step).toMatchObject({ accepted: true, kind: 'turn_completed', state: { value: from } });
    expect(step.state).not.toBe(state);
    expect(edgesOf(conversation).find((e) => e.from === from && e.on === 'turn_completed')).toMatchObject({ source: 'extension' });
  });
});

describe('conversation: rejections', () => {
  it('every terminal state rejects every event with "terminal state"', () => {
    expectTerminalsAbsorb(conversation, samples, input);
  });

  it('accepts no new turn while paused', () => {
    expectNotAllowed(conversation, at('paused'), { type: 'new_turn' }, 'event "new_turn" is not allowed in state "paused"');
  });

  it('needs explicit intervention to leave suspended: resume is for pauses', () => {
    const suspended = at('suspended');
    expect(conversation.step(suspended, { type: 'resume_requested' })).toMatchObject({
      accepted: false,
      code: 'not_allowed',
      reason: 'event "resume_requested" is not allowed in state "suspended"',
    });
  });

  it('archives only a closed conversation', () => {
    const active = at('active');
    expect(conversation.transition(active, { type: 'archive_requested' })).toBe(active);
  });
});

describe('conversation: bad input', () => {
  it('names the field of an event that fails its schema', () => {
    const step = stepUnknown(conversation, at('active'), { type: 'budget_exhausted', budgetInfo: 'lots' });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(`"invalid "budget_exhausted" event: budgetInfo: Invalid input: expected record, received string"`);
  });

  it('rejects an unknown event type by name', () => {
    const step = stepUnknown(conversation, at('active'), { type: 'close' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"unknown event type "close" for machine "conversation"; expected one of: first_message, agent_ready, new_turn, turn_completed, pause_requested, resume_requested, budget_exhausted, error_threshold, budget_replenished, reset, close_requested, cleanup_complete, archive_requested"`,
    );
  });

  it('never throws out of transition, even for hand-built events that skip validation', () => {
    const bad = [null, undefined, 42, {}, { type: 'agent_ready' }, { type: 'constructor' }, { type: '__proto__' }];
    expectNeverThrows(
      conversation,
      conversation.states.map((value) => at(value as Name)),
      bad,
    );
  });
});

describe('conversation: properties', () => {
  const text = fc.string({ maxLength: 12 });
  const jsonObject = fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 })) as fc.Arbitrary<NonNullable<ConversationInput['config']>>;
  const event: fc.Arbitrary<ConversationEvent> = fc.oneof(
    fc.constant({ type: 'first_message' as const }),
    fc.record({ type: fc.constant('agent_ready' as const), rootAgentId: fc.string({ minLength: 1, maxLength: 8 }) }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'new_turn' as const }),
    fc.constant({ type: 'turn_completed' as const }),
    fc.record({ type: fc.constant('pause_requested' as const), reason: text }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'resume_requested' as const }),
    fc.record({ type: fc.constant('budget_exhausted' as const), reason: text, budgetInfo: jsonObject }, { requiredKeys: ['type'] }),
    fc.record({ type: fc.constant('error_threshold' as const), reason: text }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'budget_replenished' as const }),
    fc.constant({ type: 'reset' as const }),
    fc.record({ type: fc.constant('close_requested' as const), reason: text }, { requiredKeys: ['type'] }),
    fc.record({ type: fc.constant('cleanup_complete' as const), finalStats: jsonObject }, { requiredKeys: ['type'] }),
    fc.constant({ type: 'archive_requested' as const }),
  );
  const inputs: fc.Arbitrary<ConversationInput> = fc.record(
    { conversationId: fc.string({ minLength: 1, maxLength: 8 }), config: jsonObject },
    { requiredKeys: [] },
  ) as fc.Arbitrary<ConversationInput>;

  it('random event sequences keep every machine property; turns count new_turn', () => {
    checkMachineProperties(conversation, {
      event,
      input: inputs,
      onAccepted: (prev, e, next) => {
        expect(next.turns ?? 0).toBe((prev.turns ?? 0) + (e.type === 'new_turn' ? 1 : 0));
        expect(next.conversationId).toBe(prev.conversationId);
      },
    });
  });
});
