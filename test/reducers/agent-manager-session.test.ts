import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { agentManagerSession, edgesOf, stepUnknown, type AgentManagerSessionEvent, type AgentManagerSessionInput, type AgentManagerSessionState } from '../../src/index.js';
import { checkMachineProperties, expectNeverThrows, expectNotAllowed, expectRow, stateAt } from '../support/machine-properties.js';
import { missingDrawnEdges, readSeed, type DrawnEdge } from '../support/seed-diagram.js';

type StateName = AgentManagerSessionState['value'];
type Ask = Extract<AgentManagerSessionEvent['type'], `ask:${string}`>;

const seed = readSeed('001_7f680d74c9e005a9.txt');
const at = (value: StateName, context: Partial<AgentManagerSessionState> = {}) => stateAt(agentManagerSession, value, context);
const autoAt = (value: StateName, context: Partial<AgentManagerSessionState> = {}) => stateAt(agentManagerSession, value, context, { autoApprove: true });

const asks: Ask[] = [
  'ask:tool',
  'ask:command',
  'ask:followup',
  'ask:completion_result',
  'ask:api_req_failed',
  'ask:resume_task',
  'ask:resume_completed_task',
  'ask:mistake_limit_reached',
  'ask:payment_required_prompt',
  'ask:invalid_model',
  'ask:browser_action_launch',
  'ask:use_mcp_server',
];

/** One valid event of every type. */
const samples: AgentManagerSessionEvent[] = [
  { type: 'start_session', prompt: 'Fix the build' },
  { type: 'send_message', text: 'main' },
  { type: 'approve_action' },
  { type: 'reject_action' },
  { type: 'cancel_session' },
  { type: 'resume_session' },
  { type: 'retry' },
  { type: 'session_created', sessionId: 'task-1' },
  { type: 'api_req_started' },
  { type: 'process_exit', code: 1 },
  { type: 'process_error', error: 'spawn ENOENT' },
  { type: 'process_lost', reason: 'the CLI process ended with the server that ran it' },
  { type: 'say:text', text: 'Looking at the build' },
  { type: 'say:completion_result', text: 'Fixed' },
  { type: 'say:checkpoint_saved' },
  ...asks.map((type) => ({ type, partial: false, text: `${type} text` }) as AgentManagerSessionEvent),
];

/** The rows of the seed's "Transition Table" as written: `from`, the event cell without backticks, `to`. */
function seedTableRows(): string[] {
  const section = seed.slice(seed.indexOf('## Transition Table'), seed.indexOf('## Derived UI State'));
  const rows = [...section.matchAll(/^\|\s*`([^`]+)`\s*\|\s*(.+?)\s*\|\s*`([^`]+)`\s*\|/gm)];
  return rows.map(([, from, on, to]) => `${from} | ${on!.replaceAll('`', '')} | ${to}`);
}

interface SeedCase {
  /** The seed's row: its `from` (`*` for any state), its event cell and its next state. */
  row: { from: string; on: string; to: StateName };
  state: AgentManagerSessionState;
  event: AgentManagerSessionEvent;
}

const seedCase = (from: StateName | '*', on: string, to: StateName, state: AgentManagerSessionState, event: AgentManagerSessionEvent): SeedCase => ({
  row: { from, on, to },
  state,
  event,
});
const allStates = agentManagerSession.states as readonly StateName[];

const seedCases: SeedCase[] = [
  seedCase('idle', 'start_session', 'creating', at('idle'), { type: 'start_session', prompt: 'Fix the build' }),
  seedCase('creating', 'session_created', 'streaming', at('creating', { apiReqStarted: true }), { type: 'session_created', sessionId: 'task-1' }),
  seedCase('creating', 'session_created', 'creating', at('creating'), { type: 'session_created', sessionId: 'task-1' }),
  seedCase('creating', 'api_req_started', 'creating', at('creating'), { type: 'api_req_started' }),
  seedCase('creating', 'process_error', 'error', at('creating'), { type: 'process_error', error: 'spawn ENOENT' }),
  seedCase('streaming', 'say:text (partial)', 'streaming', at('streaming'), { type: 'say:text', partial: true, text: 'Look' }),
  seedCase('streaming', 'say:text (complete)', 'streaming', at('streaming'), { type: 'say:text', partial: false, text: 'Looking' }),
  seedCase('streaming', 'ask:tool (partial)', 'streaming', at('streaming'), { type: 'ask:tool', partial: true, text: '{"tool":' }),
  seedCase('streaming', 'ask:tool (complete)', 'waiting_approval', at('streaming'), { type: 'ask:tool', partial: false, text: '{}' }),
  seedCase('streaming', 'ask:command (complete)', 'waiting_approval', at('streaming'), { type: 'ask:command', text: 'npm test' }),
  seedCase('streaming', 'ask:followup (complete)', 'waiting_input', at('streaming'), { type: 'ask:followup', text: 'Which branch?' }),
  seedCase('streaming', 'ask:completion_result', 'completed', at('streaming'), { type: 'ask:completion_result' }),
  seedCase('streaming', 'ask:api_req_failed', 'error', at('streaming'), { type: 'ask:api_req_failed', text: '429' }),
  seedCase('streaming', 'ask:mistake_limit_reached', 'error', at('streaming'), { type: 'ask:mistake_limit_reached' }),
  seedCase('streaming', 'ask:resume_task', 'paused', at('streaming'), { type: 'ask:resume_task' }),
  seedCase('streaming', 'cancel_session', 'stopped', at('streaming'), { type: 'cancel_session' }),
  seedCase('waiting_approval', 'approve_action', 'streaming', at('waiting_approval'), { type: 'approve_action' }),
  seedCase('waiting_approval', 'reject_action', 'streaming', at('waiting_approval'), { type: 'reject_action' }),
  seedCase('waiting_approval', 'api_req_started', 'streaming', at('waiting_approval'), { type: 'api_req_started' }),
  seedCase('waiting_approval', 'cancel_session', 'stopped', at('waiting_approval'), { type: 'cancel_session' }),
  seedCase('waiting_input', 'send_message', 'streaming', at('waiting_input'), { type: 'send_message', text: 'main' }),
  seedCase('waiting_input', 'cancel_session', 'stopped', at('waiting_input'), { type: 'cancel_session' }),
  seedCase('completed', 'send_message', 'streaming', at('completed'), { type: 'send_message', text: 'also the docs' }),
  seedCase('completed', 'start_session', 'creating', at('completed'), { type: 'start_session', prompt: 'Next task' }),
  seedCase('paused', 'resume_session', 'streaming', at('paused'), { type: 'resume_session' }),
  seedCase('paused', 'cancel_session', 'stopped', at('paused'), { type: 'cancel_session' }),
  seedCase('error', 'retry', 'streaming', at('error'), { type: 'retry' }),
  seedCase('error', 'cancel_session', 'stopped', at('error'), { type: 'cancel_session' }),
  seedCase('stopped', 'resume_session', 'streaming', at('stopped'), { type: 'resume_session' }),
  seedCase('stopped', 'start_session', 'creating', at('stopped'), { type: 'start_session', prompt: 'Next task' }),
  // "*": every state; a clean exit only where no ask is pending.
  ...allStates.map((s) => seedCase('*', 'process_exit (error)', 'error', at(s), { type: 'process_exit', code: 1 })),
  ...allStates
    .filter((s) => s !== 'waiting_approval' && s !== 'waiting_input')
    .map((s) => seedCase('*', 'process_exit (success)', 'completed', at(s), { type: 'process_exit', code: 0 })),
];

describe('agentManagerSession: seed 001 transition table, row by row', () => {
  it("the cases cover exactly the rows of the seed's table", () => {
    const covered = new Set(seedCases.map(({ row }) => `${row.from} | ${row.on} | ${row.to}`));
    expect([...covered].sort()).toEqual(seedTableRows().sort());
    expect(covered.size).toBe(32);
  });

  it.each(seedCases)('$row.from + $row.on -> $row.to (in $state.value)', ({ state, event, row }) => {
    expect(expectRow(agentManagerSession, state, event, row.to)).not.toBe(state);
  });

  it('a clean exit with an approval pending pauses the session, saying why; with a question pending the question stays', () => {
    const exit = { type: 'process_exit', code: 0 } as const;
    expect(agentManagerSession.transition(at('waiting_approval', { lastAsk: 'command' }), exit)).toMatchObject({
      value: 'paused',
      exitCode: 0,
      error: 'the CLI exited (code 0) while its ask:command awaited approval, so no process can be told the answer; resume_session starts it again',
    });
    expect(agentManagerSession.transition(at('waiting_input', { lastAsk: 'followup', lastText: 'Which branch?' }), exit)).toMatchObject({
      value: 'waiting_input',
      exitCode: 0,
      lastText: 'Which branch?',
    });
  });

  it('rejects an event that does not apply with the same object and a reason', () => {
    expectNotAllowed(agentManagerSession, at('idle'), { type: 'send_message', text: 'hi' }, 'event "send_message" is not allowed in state "idle"');
    const waiting = at('waiting_input');
    expect(agentManagerSession.step(waiting, { type: 'ask:tool' })).toMatchObject({
      accepted: false,
      code: 'not_allowed',
      reason: 'event "ask:tool" is not allowed in state "waiting_input"',
    });
  });
});

describe('agentManagerSession: DESIGN.md resolutions', () => {
  it('creating needs session_created and api_req_started, in either order', () => {
    const created = agentManagerSession.transition(at('creating'), { type: 'session_created', sessionId: 'task-1' });
    expect(created).toMatchObject({ value: 'creating', sessionCreated: true, apiReqStarted: false, sessionId: 'task-1' });
    expect(agentManagerSession.transition(created, { type: 'api_req_started' })).toMatchObject({
      value: 'streaming',
      sessionId: 'task-1',
    });

    const started = agentManagerSession.transition(at('creating'), { type: 'api_req_started' });
    expect(started).toMatchObject({ value: 'creating', sessionCreated: false, apiReqStarted: true });
    const step = agentManagerSession.step(started, { type: 'api_req_started' });
    expect(step).toMatchObject({ accepted: true, state: { value: 'creating' } });
    expect(agentManagerSession.transition(started, { type: 'session_created', sessionId: 'task-2' })).toMatchObject({
      value: 'streaming',
      sessionId: 'task-2',
    });
  });

  it.each(asks)('a partial %s in streaming stays in streaming and keeps its text', (type) => {
    for (const state of [at('streaming', { lastAsk: 'tool' }), autoAt('streaming', { lastAsk: 'tool' })]) {
      const next = agentManagerSession.transition(state, { type, partial: true, text: 'so far' });
      expect(next).not.toBe(state);
      expect(next).toEqual({ ...state, lastText: 'so far' });
    }
  });

  it.each(['ask:tool', 'ask:command', 'ask:browser_action_launch', 'ask:use_mcp_server'] as const)(
    'a complete %s waits for approval, or passes straight on in auto-approve mode',
    (type) => {
      const name = type.slice('ask:'.length);
      expect(agentManagerSession.transition(at('streaming'), { type, text: 'x' })).toMatchObject({
        value: 'waiting_approval',
        lastAsk: name,
        lastText: 'x',
      });
      const auto = autoAt('streaming');
      const step = agentManagerSession.step(auto, { type, partial: false, text: 'x' });
      expect(step).toMatchObject({ accepted: true, kind: type, state: { value: 'streaming', lastAsk: name, lastText: 'x' } });
    },
  );

  it.each([
    ['ask:payment_required_prompt', 'error'],
    ['ask:invalid_model', 'error'],
    ['ask:resume_completed_task', 'paused'],
  ] as const)('a complete %s goes to %s', (type, to) => {
    expect(agentManagerSession.step(at('streaming'), { type })).toMatchObject({ accepted: true, kind: type, state: { value: to } });
  });

  it("resume_session in error goes back to streaming, as the seed's diagram draws it", () => {
    expect(agentManagerSession.transition(at('error'), { type: 'resume_session' }).value).toBe('streaming');
  });

  it('every design row says why it exists', () => {
    const design = edgesOf(agentManagerSession).filter((e) => e.source === 'design');
    expect(design.length).toBeGreaterThan(0);
    for (const edge of design) expect(edge.note, `${edge.from} ${edge.on}`).toBeTruthy();
  });
});

describe('agentManagerSession: extensions', () => {
  it('lists exactly these extension rows, each with its reason', () => {
    const extensions = edgesOf(agentManagerSession).filter((e) => e.source === 'extension');
    expect(extensions.map((e) => `${e.from} --${e.on}--> ${e.to}`)).toEqual([
      'streaming --say:completion_result--> streaming',
      'streaming --say:checkpoint_saved--> streaming',
      'streaming --api_req_started--> streaming',
      'streaming --session_created--> streaming',
      'streaming --process_error--> error',
      'waiting_approval --process_error--> error',
      'waiting_input --process_error--> error',
      'completed --process_error--> error',
      'paused --process_error--> error',
      'creating --process_lost--> error',
      'streaming --process_lost--> paused',
      'waiting_approval --process_lost--> paused',
      'waiting_input --process_lost--> paused',
      'waiting_approval --process_exit--> paused',
      'waiting_input --process_exit--> waiting_input',
      'creating --cancel_session--> stopped',
    ]);
    for (const edge of extensions) expect(edge.note).toBeTruthy();
  });

  it.each([
    { type: 'say:completion_result', text: 'All tests pass' },
    { type: 'say:checkpoint_saved' },
    { type: 'api_req_started', text: '{"request":"..."}' },
  ] as AgentManagerSessionEvent[])('$type is a streaming self-loop', (event) => {
    const state = at('streaming', { lastText: 'before' });
    const next = agentManagerSession.transition(state, event);
    expect(next).not.toBe(state);
    expect(next.value).toBe('streaming');
  });

  it.each(['streaming', 'waiting_approval', 'waiting_input', 'completed', 'paused'] as const)('process_error in %s goes to error and keeps the error', (value) => {
    expect(agentManagerSession.transition(at(value), { type: 'process_error', error: 'EPIPE' })).toMatchObject({
      value: 'error',
      error: 'EPIPE',
    });
  });

  it.each([
    ['creating', 'error'],
    ['streaming', 'paused'],
    ['waiting_approval', 'paused'],
    ['waiting_input', 'paused'],
  ] as const)('process_lost in %s goes to %s, keeping the reason; elsewhere it is not allowed', (value, to) => {
    expect(agentManagerSession.transition(at(value), { type: 'process_lost', reason: 'server restarted' })).toMatchObject({ value: to, error: 'server restarted' });
    for (const other of ['idle', 'completed', 'paused', 'error', 'stopped'] as const) {
      expect(agentManagerSession.step(at(other), { type: 'process_lost', reason: 'x' }).accepted).toBe(false);
    }
  });

  it('session_created in streaming records the CLI session of a task retried after its CLI never started; a second one is not allowed', () => {
    const events: AgentManagerSessionEvent[] = [{ type: 'start_session', prompt: 'Fix it' }, { type: 'process_error', error: 'spawn_failed: ENOENT' }, { type: 'retry' }];
    const retried = events.reduce<AgentManagerSessionState>((s, e) => agentManagerSession.transition(s, e), autoAt('idle'));
    expect(retried).toMatchObject({ value: 'streaming', sessionCreated: false });
    const created = agentManagerSession.transition(retried, { type: 'session_created', sessionId: 'task-2' });
    expect(created).toMatchObject({ value: 'streaming', sessionCreated: true, sessionId: 'task-2' });
    expect(agentManagerSession.step(created, { type: 'session_created', sessionId: 'task-3' }).accepted).toBe(false);
  });

  it('cancel_session while creating stops the session', () => {
    expect(agentManagerSession.transition(at('creating'), { type: 'cancel_session' }).value).toBe('stopped');
  });
});

describe('agentManagerSession: context', () => {
  it('starts idle with auto-approve off, or as the input says', () => {
    expect(agentManagerSession.initial()).toEqual({ value: 'idle', autoApprove: false, sessionCreated: false, apiReqStarted: false });
    expect(agentManagerSession.initial({})).toMatchObject({ autoApprove: false });
    expect(agentManagerSession.initial({ autoApprove: true })).toMatchObject({ autoApprove: true });
    expect(agentManagerSession.initial({ cli: 'cline' })).toMatchObject({ cli: 'cline' });
    expect(agentManagerSession.schemas.input.safeParse({ cli: '../bin/sh' }).success).toBe(false);
  });

  it('a whole session records the prompt, the session id, the last text and ask, and the exit code', () => {
    const events: AgentManagerSessionEvent[] = [
      { type: 'start_session', prompt: 'Fix the build' },
      { type: 'session_created', sessionId: 'task-1' },
      { type: 'api_req_started' },
      { type: 'say:text', partial: true, text: 'Look' },
      { type: 'say:text', partial: false, text: 'Looking at the build' },
      { type: 'ask:followup', partial: true, text: 'Which' },
      { type: 'ask:followup', partial: false, text: 'Which branch?' },
      { type: 'send_message', text: 'main' },
      { type: 'say:checkpoint_saved' },
      { type: 'ask:completion_result', text: 'Fixed' },
      { type: 'process_exit', code: 0 },
    ];
    const end = events.reduce<AgentManagerSessionState>((s, e) => agentManagerSession.transition(s, e), agentManagerSession.initial());
    expect(end).toEqual({
      value: 'completed',
      autoApprove: false,
      sessionCreated: true,
      apiReqStarted: true,
      prompt: 'Fix the build',
      sessionId: 'task-1',
      lastText: 'Fixed',
      lastAsk: 'completion_result',
      exitCode: 0,
    });
  });

  it('an error ask keeps its text as the error, else its name', () => {
    expect(agentManagerSession.transition(at('streaming'), { type: 'ask:api_req_failed', text: '429 rate limited' })).toMatchObject({
      value: 'error',
      error: '429 rate limited',
      lastAsk: 'api_req_failed',
    });
    expect(agentManagerSession.transition(at('streaming'), { type: 'ask:invalid_model' })).toMatchObject({ value: 'error', error: 'invalid_model', lastAsk: 'invalid_model' });
  });

  it('start_session forgets the previous task but keeps auto-approve', () => {
    const finished = autoAt('stopped', {
      sessionCreated: true,
      apiReqStarted: true,
      prompt: 'old',
      sessionId: 'task-1',
      lastText: 'old text',
      lastAsk: 'followup',
      error: 'boom',
      exitCode: 1,
    });
    expect(agentManagerSession.transition(finished, { type: 'start_session', prompt: 'new' })).toEqual({
      value: 'creating',
      autoApprove: true,
      sessionCreated: false,
      apiReqStarted: false,
      prompt: 'new',
    });
  });
});

describe("agentManagerSession: the seed's diagram", () => {
  // The diagram is hand-drawn ASCII, not Mermaid: these are its clearly drawn edges, each with its
  // label as drawn. The `cancel_session` arrows into `idle` and the `completed -> stopped` line
  // (labelled send_message) contradict the seed's table, which wins (DESIGN.md), so they are not listed.
  const drawn: DrawnEdge[] = [
    { from: 'idle', to: 'creating', label: 'start_session' },
    { from: 'creating', to: 'streaming', label: 'session_created' },
    { from: 'creating', to: 'error', label: 'process_error' },
    { from: 'streaming', to: 'error', label: 'ask:api_req_failed' },
    { from: 'streaming', to: 'error', label: 'ask:mistake_limit_reached' },
    { from: 'streaming', to: 'error', label: 'ask:invalid_model' },
    { from: 'streaming', to: 'error', label: 'ask:payment_required' },
    { from: 'error', to: 'streaming', label: 'retry/resume' },
    { from: 'streaming', to: 'waiting_approval', label: 'ask:tool/command (complete)' },
    { from: 'waiting_approval', to: 'streaming', label: 'approve_action / auto-approve' },
    { from: 'streaming', to: 'waiting_input', label: 'ask:followup (complete)' },
    { from: 'waiting_input', to: 'streaming', label: 'send_message' },
    { from: 'streaming', to: 'completed', label: 'ask:completion_result' },
    { from: 'stopped', to: 'streaming', label: 'resume_session' },
    { from: 'streaming', to: 'paused', label: 'ask:resume_task' },
    { from: 'paused', to: 'streaming', label: 'resume_session' },
  ];
  const eventsOfLabel: Record<string, string[]> = {
    'ask:payment_required': ['ask:payment_required_prompt'],
    'retry/resume': ['retry', 'resume_session'],
    'ask:tool/command (complete)': ['ask:tool', 'ask:command'],
    // "auto-approve" is the api_req_started that ends a transient waiting_approval (seed's table).
    'approve_action / auto-approve': ['approve_action', 'api_req_started'],
    'ask:followup (complete)': ['ask:followup'],
  };
  const labelToEvents = (edge: DrawnEdge) => eventsOfLabel[edge.label] ?? [edge.label];

  it("every listed label is drawn in the seed's diagram", () => {
    const diagram = seed.slice(seed.indexOf('## State Transitions'), seed.indexOf('## Transition Table'));
    for (const { label } of drawn) expect(diagram, label).toContain(label);
  });

  it("every clearly drawn transition is in the machine's table", () => {
    expect(missingDrawnEdges(edgesOf(agentManagerSession), drawn, labelToEvents)).toEqual([]);
  });
});

describe('agentManagerSession: no terminal state', () => {
  it.each(agentManagerSession.states)('%s accepts some event, so no session is stuck', (value) => {
    const state = at(value as StateName);
    expect(samples.some((e) => agentManagerSession.transition(state, e) !== state)).toBe(true);
  });

  it('the samples cover every event type', () => {
    expect(agentManagerSession.terminal).toEqual([]);
    expect(samples.map((e) => e.type).sort()).toEqual([...agentManagerSession.events].sort());
  });
});

describe('agentManagerSession: bad input', () => {
  it('names the field of an event that fails its schema', () => {
    const idle = at('idle');
    const reason = (value: unknown) => {
      const step = stepUnknown(agentManagerSession, idle, value);
      expect(step).toMatchObject({ accepted: false, code: 'invalid_event', state: idle });
      return !step.accepted && step.reason;
    };
    expect(reason({ type: 'start_session' })).toMatchInlineSnapshot(`"invalid "start_session" event: prompt: Invalid input: expected string, received undefined"`);
    expect(reason({ type: 'session_created', sessionId: '' })).toMatchInlineSnapshot(
      `"invalid "session_created" event: sessionId: Too small: expected string to have >=1 characters"`,
    );
    expect(reason({ type: 'process_exit', code: 1.5 })).toMatchInlineSnapshot(`"invalid "process_exit" event: code: Invalid input: expected int, received number"`);
    expect(reason({ type: 'ask:tool', partial: 'yes' })).toMatchInlineSnapshot(`"invalid "ask:tool" event: partial: Invalid input: expected boolean, received string"`);
  });

  it('rejects an unknown event type by name', () => {
    const step = stepUnknown(agentManagerSession, at('streaming'), { type: 'ask:report_bug' });
    expect(step).toMatchObject({ accepted: false, code: 'unknown_event' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"unknown event type "ask:report_bug" for machine "agent-manager-session"; expected one of: start_session, send_message, approve_action, reject_action, cancel_session, resume_session, retry, session_created, api_req_started, process_exit, process_error, process_lost, say:text, say:completion_result, say:checkpoint_saved, ask:tool, ask:command, ask:followup, ask:completion_result, ask:api_req_failed, ask:resume_task, ask:resume_completed_task, ask:mistake_limit_reached, ask:payment_required_prompt, ask:invalid_model, ask:browser_action_launch, ask:use_mcp_server"`,
    );
  });

  it('never throws out of transition, even for hand-built events that skip validation', () => {
    const bad = [null, undefined, 42, {}, { type: 'process_exit' }, { type: 'ask:tool', partial: 'yes' }, { type: 'toString' }, { type: '__proto__' }];
    expectNeverThrows(
      agentManagerSession,
      agentManagerSession.states.map((value) => at(value as StateName)),
      bad,
    );
  });
});

describe('agentManagerSession: properties', () => {
  const cliFields = fc.record({ partial: fc.boolean(), text: fc.string() }, { requiredKeys: [] });
  const cliEvent = <T extends AgentManagerSessionEvent['type']>(type: T) => cliFields.map((fields) => ({ type, ...fields }));
  const event = fc.oneof(
    fc.string().map((prompt) => ({ type: 'start_session' as const, prompt })),
    fc.string().map((text) => ({ type: 'send_message' as const, text })),
    fc.constantFrom(
      { type: 'approve_action' as const },
      { type: 'reject_action' as const },
      { type: 'cancel_session' as const },
      { type: 'resume_session' as const },
      { type: 'retry' as const },
    ),
    fc.string({ minLength: 1 }).map((sessionId) => ({ type: 'session_created' as const, sessionId })),
    fc.oneof(fc.constant(0), fc.integer({ min: -255, max: 255 })).map((code) => ({ type: 'process_exit' as const, code })),
    fc.string().map((error) => ({ type: 'process_error' as const, error })),
    fc.constantFrom('api_req_started' as const, 'say:text' as const, 'say:completion_result' as const, 'say:checkpoint_saved' as const, ...asks).chain(cliEvent),
  ) as fc.Arbitrary<AgentManagerSessionEvent>;
  const input: fc.Arbitrary<AgentManagerSessionInput> = fc.option(fc.record({ autoApprove: fc.boolean() }, { requiredKeys: [] }), { nil: undefined });

  it('random event sequences keep every machine property', () => {
    checkMachineProperties(agentManagerSession, {
      event,
      input,
      onAccepted: (prev, e, next) => {
        expect(next.autoApprove).toBe(prev.autoApprove);
        const isWaiting = next.value === 'waiting_approval' || next.value === 'waiting_input';
        if ('partial' in e && e.partial === true) expect(isWaiting, `partial ${e.type} entered ${next.value}`).toBe(false);
        if (prev.autoApprove && e.type.startsWith('ask:')) expect(next.value).not.toBe('waiting_approval');
      },
    });
  });
});
