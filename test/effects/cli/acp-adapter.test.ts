import { Subject } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { ACP_RESUME_PROMPT, acpCliAdapter } from '../../../src/effects/cli/acp-adapter.js';
import type { CliRun, CliUserEvent } from '../../../src/effects/cli/cli-adapter.js';
import { agentManagerSession } from '../../../src/reducers/agent-manager-session/machine.js';
import type { AgentManagerSessionEvent, AgentManagerSessionState } from '../../../src/reducers/agent-manager-session/schema.js';
import { kiloTranscript, scriptedAcpAgent, type TranscriptEntry } from '../../support/acp-peer.js';
import { type FoldedSession, foldAcpSession, type SessionUser } from '../../support/acp-session.js';

/** Where the recordings ran: the transcripts write the scratch folder as `$SCRATCH`. */
const cwd = '$SCRATCH/cwd';
const newTask = (prompt: string, autoApprove = false): CliRun => ({ start: { type: 'new_task', prompt }, autoApprove, cwd });

async function replay(entries: readonly TranscriptEntry[], run: CliRun, user?: SessionUser, from?: AgentManagerSessionState, chunkBytes?: number) {
  const agent = scriptedAcpAgent(entries, chunkBytes === undefined ? {} : { chunkBytes });
  const folded = await foldAcpSession(agent.io, run, user, from);
  return { ...folded, unsent: agent.unsent() };
}

/** The drive ended without error, sent every request the transcript has, and the machine took every event. */
function expectClean(s: FoldedSession & { unsent: readonly unknown[] }) {
  expect(s.error).toBeUndefined();
  expect(s.unsent).toEqual([]);
  expect(s.rejected).toEqual([]);
}

const texts = (folded: FoldedSession, type: AgentManagerSessionEvent['type']) =>
  folded.events.filter((e) => e.type === type && (e as { partial?: boolean }).partial !== true).map((e) => (e as { text?: string }).text);

/** A session that completed a task: where a follow-up or a resume starts from. */
const after = (value: AgentManagerSessionState['value'], autoApprove = false): AgentManagerSessionState => ({
  ...agentManagerSession.initial({ autoApprove }),
  value,
  sessionCreated: true,
  apiReqStarted: true,
});

describe('acpCliAdapter on kilo 7.7.7 transcripts', () => {
  it('is the interactive acp protocol and adds no arguments to the configured command', () => {
    expect(acpCliAdapter.protocol).toBe('acp');
    expect(acpCliAdapter.interactive).toBe(true);
    expect(acpCliAdapter.launch(newTask('x'))).toEqual({ args: [] });
  });

  it('write approved: creating -> streaming -> waiting_approval -> (approve) streaming -> completed, every request as recorded', async () => {
    const s = await replay(kiloTranscript('write-approved'), newTask('Create hello.txt saying hello.'), { permissions: ['approve'] });
    expectClean(s);
    expect(s.states).toEqual(['idle', 'creating', 'streaming', 'waiting_approval', 'streaming', 'completed']);
    expect(s.events.slice(0, 3)).toEqual([
      { type: 'start_session', prompt: 'Create hello.txt saying hello.' },
      { type: 'session_created', sessionId: 'ses_df425f0feffejqRALEpd82Jv6z' },
      { type: 'api_req_started' },
    ]);
    const ask = s.events.find((e) => e.type === 'ask:tool' && e.partial === false) as { text: string };
    expect(JSON.parse(ask.text)).toMatchObject({ tool: '$SCRATCH/cwd/hello.txt', kind: 'edit', input: { filepath: '$SCRATCH/cwd/hello.txt' } });
    expect(s.ignored).toContain('fs/write_text_file: not offered to the agent (answered -32601)');
    expect(texts(s, 'ask:completion_result')).toEqual(['I created hello.txt.']);
    expect(s.state.lastText).toBe('I created hello.txt.');
  });

  it('reads lines split in 7-byte chunks and ignores garbage lines with their reason', async () => {
    const garbage: TranscriptEntry[] = [
      { from: 'agent', line: 'SIGTERM received, shutting down...' },
      { from: 'agent', line: '{"jsonrpc":"1.0","method":"x"}' },
      { from: 'agent', line: '[1,2]' },
      { from: 'agent', message: { jsonrpc: '2.0', id: 99, result: {} } },
      { from: 'agent', message: { jsonrpc: '2.0', method: 'session/update', params: { sessionId: 'other', update: { sessionUpdate: 'agent_message_chunk' } } } },
    ];
    const entries = kiloTranscript('write-approved');
    const s = await replay(
      [...garbage, ...entries.slice(0, 4), ...garbage, ...entries.slice(4)],
      newTask('Create hello.txt saying hello.'),
      { permissions: ['approve'] },
      undefined,
      7,
    );
    expectClean(s);
    expect(s.states).toEqual(['idle', 'creating', 'streaming', 'waiting_approval', 'streaming', 'completed']);
    expect(s.ignored).toEqual(
      expect.arrayContaining([
        'not JSON: SIGTERM received, shutting down...',
        'not a JSON-RPC 2.0 message: jsonrpc: Invalid input: expected "2.0"',
        'a response to no request of ours (id 99)',
        'session/update agent_message_chunk of another session (other)',
      ]),
    );
    expect(s.ignored.filter((reason) => reason.startsWith('not a JSON-RPC 2.0 message'))).toHaveLength(4);
  });

  it('write rejected: the reject answers reject_once, the failed tool is ignored, the turn completes without text', async () => {
    const s = await replay(kiloTranscript('write-rejected'), newTask('Create hello.txt saying hello.'), { permissions: ['reject'] });
    expectClean(s);
    expect(s.states).toEqual(['idle', 'creating', 'streaming', 'waiting_approval', 'streaming', 'completed']);
    expect(s.ignored).toContain('tool call call_write_1 failed: its result has no agentManagerSession event');
    expect(s.events.at(-1)).toEqual({ type: 'ask:completion_result', partial: false });
  });

  it('auto-approve: the permission is answered allow_once at once, the complete ask passes through streaming', async () => {
    const s = await replay(kiloTranscript('write-approved'), newTask('Create hello.txt saying hello.', true));
    expectClean(s);
    expect(s.states).toEqual(['idle', 'creating', 'streaming', 'completed']);
    expect(s.events.some((e) => e.type === 'ask:tool' && e.partial === false)).toBe(true);
  });

  it('a command (kind execute) is ask:command with the command as its text, partial while it streams, and its updates after the permission request are ignored', async () => {
    const s = await replay(kiloTranscript('command-approved'), newTask('Write hi.txt with a shell command.'), { permissions: ['approve'] });
    expectClean(s);
    expect(s.states).toEqual(['idle', 'creating', 'streaming', 'waiting_approval', 'streaming', 'completed']);
    expect(s.events.filter((e) => e.type === 'ask:command').map((e) => [e.partial, e.text])).toEqual([
      [true, 'bash'],
      [true, 'echo hi > hi.txt'],
      [false, 'echo hi > hi.txt'],
    ]);
    expect(s.ignored.filter((reason) => reason.includes('updated after its permission request'))).toHaveLength(3);
  });

  it('a tool_call_update arriving after its permission request (a loaded machine) changes nothing: no partial ask follows the complete one', async () => {
    // As recorded, kilo's in_progress updates come after the answer; under load one came between the
    // request and the answer, while the session waits for approval.
    const entries = kiloTranscript('command-approved');
    const request = entries.findIndex((entry) => 'message' in entry && entry.message.method === 'session/request_permission');
    const late = entries.findIndex((entry, index) => index > request && 'message' in entry && entry.message.method === 'session/update');
    expect(JSON.stringify(entries[late])).toContain('"status":"in_progress"');
    const reordered = [...entries.slice(0, request + 1), entries[late]!, ...entries.slice(request + 1, late), ...entries.slice(late + 1)];
    const s = await replay(reordered, newTask('Write hi.txt with a shell command.'), { permissions: ['approve'] });
    expectClean(s);
    expect(s.states).toEqual(['idle', 'creating', 'streaming', 'waiting_approval', 'streaming', 'completed']);
    expect(s.events.filter((e) => e.type === 'ask:command').map((e) => [e.partial, e.text])).toEqual([
      [true, 'bash'],
      [true, 'echo hi > hi.txt'],
      [false, 'echo hi > hi.txt'],
    ]);
    expect(s.ignored).toContain('tool call call_bash_1 updated after its permission request: its ask is complete already');
  });

  it('follow-up: send_message after completion is a second session/prompt in the same process', async () => {
    const s = await replay(kiloTranscript('follow-up'), newTask('Say hi.'), { followUps: ['Now say bye.'] });
    expectClean(s);
    expect(s.states).toEqual(['idle', 'creating', 'streaming', 'completed', 'streaming', 'completed']);
    expect(texts(s, 'say:text')).toEqual(['Hi there.', 'Bye now.']);
    expect(texts(s, 'ask:completion_result')).toEqual(['Hi there.', 'Bye now.']);
    expect(s.events.filter((e) => e.type === 'api_req_started')).toHaveLength(2);
  });

  it('a follow-up in a new process loads the session, skips the replayed history, then prompts', async () => {
    const entries = kiloTranscript('resume.load');
    const sessionId = 'ses_df42590b3ffe8mUA9ibKrXcWwf';
    const run: CliRun = { start: { type: 'follow_up', text: 'Now say bye.' }, sessionId, autoApprove: false, cwd };
    const from = agentManagerSession.transition(after('completed'), { type: 'send_message', text: 'Now say bye.' });
    const s = await replay(entries, run, {}, from);
    expectClean(s);
    expect(s.states).toEqual(['streaming', 'completed']);
    expect(s.ignored.filter((reason) => reason.includes('replayed by session/load'))).toHaveLength(2);
    expect(texts(s, 'ask:completion_result')).toEqual(['Bye now.']);
  });

  it(`a resume run loads the session and prompts "${ACP_RESUME_PROMPT}"`, async () => {
    // The recording's second process sent a follow-up; a resume sends the resume prompt in its place.
    const entries = kiloTranscript('resume.load').map((entry) =>
      'message' in entry && entry.message.method === 'session/prompt'
        ? { ...entry, message: { ...entry.message, params: { ...(entry.message.params as object), prompt: [{ type: 'text', text: ACP_RESUME_PROMPT }] } } }
        : entry,
    );
    const run: CliRun = { start: { type: 'resume' }, sessionId: 'ses_df42590b3ffe8mUA9ibKrXcWwf', autoApprove: false, cwd };
    const from = agentManagerSession.transition(after('stopped'), { type: 'resume_session' });
    const s = await replay(entries, run, {}, from);
    expectClean(s);
    expect(s.states).toEqual(['streaming', 'completed']);
  });

  it('a model server failure (HTTP 500): kilo answers session/prompt with -32603, the turn fails (ask:api_req_failed) and the drive goes on', async () => {
    const s = await replay(kiloTranscript('server-error'), newTask('Say hi.'));
    expect(s.unsent).toEqual([]);
    expect(s.error).toBeUndefined();
    expect(s.states).toEqual(['idle', 'creating', 'streaming', 'error']);
    expect(s.state.error).toBe('The agent failed the prompt (JSON-RPC error -32603: Internal error: scripted failure 500)');
  });
});

// Synthetic transcripts: what kilo did not do, in the same format.
const client = (message: Record<string, unknown>): TranscriptEntry => ({ from: 'client', message: { jsonrpc: '2.0', ...message } });
const agent = (message: Record<string, unknown>): TranscriptEntry => ({ from: 'agent', message: { jsonrpc: '2.0', ...message } });
const initialize = (loadSession: boolean): TranscriptEntry[] => [
  client({ id: 0, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false } } }),
  agent({ id: 0, result: { protocolVersion: 1, agentCapabilities: { loadSession } } }),
];
const created = (id: number): TranscriptEntry[] => [client({ id, method: 'session/new', params: { cwd, mcpServers: [] } }), agent({ id, result: { sessionId: 's1' } })];
const promptOf = (id: number, text: string) => client({ id, method: 'session/prompt', params: { sessionId: 's1', prompt: [{ type: 'text', text }] } });
const update = (update: Record<string, unknown>) => agent({ method: 'session/update', params: { sessionId: 's1', update } });
const chunk = (text: string, messageId?: string) => update({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text }, ...(messageId ? { messageId } : {}) });
const start = (prompt = 'go'): TranscriptEntry[] => [...initialize(false), ...created(1), promptOf(2, prompt)];

describe('acpCliAdapter on synthetic transcripts', () => {
  it('streams each chunk as a partial say:text and the whole message as the complete one (UTF-8 split across chunks); a new messageId starts a new message', async () => {
    const entries = [...start(), chunk('héllo ', 'm1'), chunk('wörld ✓', 'm1'), chunk('second', 'm2'), agent({ id: 2, result: { stopReason: 'end_turn' } })];
    const s = await replay(entries, newTask('go'), {}, undefined, 3);
    expect(s.rejected).toEqual([]);
    expect(s.events.filter((e) => e.type === 'say:text').map((e) => [e.partial, e.text])).toEqual([
      [true, 'héllo '],
      [true, 'wörld ✓'],
      [false, 'héllo wörld ✓'],
      [true, 'second'],
      [false, 'second'],
    ]);
    expect(s.events.at(-1)).toEqual({ type: 'ask:completion_result', partial: false, text: 'héllo wörld ✓\n\nsecond' });
  });

  it.each([
    ['cancelled', 'paused', 'ask:resume_task'],
    ['max_tokens', 'error', 'ask:api_req_failed'],
    ['max_turn_requests', 'error', 'ask:api_req_failed'],
    ['refusal', 'error', 'ask:api_req_failed'],
  ])('stopReason %s ends the turn in %s (%s)', async (stopReason, state, type) => {
    const s = await replay([...start(), chunk('partial answer'), agent({ id: 2, result: { stopReason } })], newTask('go'));
    expect(s.rejected).toEqual([]);
    expect(s.states.at(-1)).toBe(state);
    expect(s.events.at(-1)?.type).toBe(type);
  });

  it('answers client methods it does not offer with -32601, a malformed permission request with -32602, and ignores unknown updates', async () => {
    const entries = [
      ...start(),
      agent({ id: 't', method: 'terminal/create', params: { sessionId: 's1', command: 'ls' } }),
      client({ id: 't', error: { code: -32601, message: '"Method not found": terminal/create', data: { method: 'terminal/create' } } }),
      agent({ id: 'p', method: 'session/request_permission', params: { sessionId: 's1', options: [] } }),
      client({
        id: 'p',
        error: { code: -32602, message: 'Invalid params: toolCall: Invalid input: expected object, received undefined; options: Too small: expected array to have >=1 items' },
      }),
      update({ sessionUpdate: 'plan', entries: [] }),
      update({ sessionUpdate: 'tool_call' }),
      agent({ method: 'session/cancelled_by_magic' }),
      agent({ id: 2, result: { stopReason: 'end_turn' } }),
    ];
    const s = await replay(entries, newTask('go'));
    expect(s.unsent).toEqual([]);
    expect(s.error).toBeUndefined();
    expect(s.states).toEqual(['idle', 'creating', 'streaming', 'completed']);
    expect(s.ignored).toEqual([
      'terminal/create: not offered to the agent (answered -32601)',
      'invalid session/request_permission (answered -32602): toolCall: Invalid input: expected object, received undefined; options: Too small: expected array to have >=1 items',
      'session/update plan has no agentManagerSession event',
      'invalid tool_call: toolCallId: Invalid input: expected string, received undefined',
      'notification session/cancelled_by_magic has no agentManagerSession event',
    ]);
  });

  it('an approval with no permission waiting is ignored with the reason', async () => {
    // The agent then waits for an answer never sent, so the process stays up.
    const entries = [
      ...start(),
      update({ sessionUpdate: 'tool_call', toolCallId: 'c', title: 'write', kind: 'edit', status: 'pending' }),
      client({ id: 'never' }),
      agent({ method: 'x' }),
    ];
    const agentSide = scriptedAcpAgent(entries);
    const user$ = new Subject<CliUserEvent>();
    const outputs: unknown[] = [];
    const subscription = acpCliAdapter.drive(agentSide.io, newTask('go'), user$).subscribe((o) => outputs.push(o));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(outputs.at(-1)).toMatchObject({ event: { type: 'ask:tool', partial: true } });
    user$.next({ type: 'approve_action' });
    expect(outputs.at(-1)).toEqual({ ignored: 'approve_action: no permission request is waiting' });
    subscription.unsubscribe();
  });

  it('a resume run on an agent without loadSession starts a new session and asks the user what to do, with a note', async () => {
    const entries = [...initialize(false), ...created(1), promptOf(2, 'Start over: write a.txt'), agent({ id: 2, result: { stopReason: 'end_turn' } })];
    const run: CliRun = { start: { type: 'resume' }, sessionId: 'old', autoApprove: false, cwd };
    const from = agentManagerSession.transition(after('stopped'), { type: 'resume_session' });
    const s = await replay(entries, run, { followUps: ['Start over: write a.txt'] }, from);
    expect(s.unsent).toEqual([]);
    expect(s.rejected).toEqual([]);
    expect(s.events[0]).toEqual({
      type: 'ask:followup',
      partial: false,
      text: 'The agent cannot load session old (no loadSession capability): the agent continues in a new session (s1) without the earlier conversation. What should it do?',
    });
    expect(s.states).toEqual(['streaming', 'waiting_input', 'streaming', 'completed']);
  });

  it('a follow-up run whose session/load fails continues in a new session with a note, then prompts', async () => {
    const entries = [
      ...initialize(true),
      client({ id: 1, method: 'session/load', params: { sessionId: 'old', cwd, mcpServers: [] } }),
      update({ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'not replayed: other session' } }),
      agent({ id: 1, error: { code: -32002, message: 'Resource not found' } }),
      ...created(2),
      promptOf(3, 'and then?'),
      chunk('done'),
      agent({ id: 3, result: { stopReason: 'end_turn' } }),
    ];
    const run: CliRun = { start: { type: 'follow_up', text: 'and then?' }, sessionId: 'old', autoApprove: false, cwd };
    const from = agentManagerSession.transition(after('completed'), { type: 'send_message', text: 'and then?' });
    const s = await replay(entries, run, {}, from);
    expect(s.unsent).toEqual([]);
    expect(s.rejected).toEqual([]);
    expect(texts(s, 'say:text')[0]).toBe(
      'The agent could not load session old (JSON-RPC error -32002: Resource not found): the agent continues in a new session (s1) without the earlier conversation.',
    );
    expect(s.states).toEqual(['streaming', 'completed']);
  });

  it.each([
    ['initialize', [...initialize(false).slice(0, 1), agent({ id: 0, error: { code: -32603, message: 'boom' } })], 'acp: initialize failed: JSON-RPC error -32603: boom'],
    [
      'session/new',
      [
        ...initialize(false),
        client({ id: 1, method: 'session/new', params: { cwd, mcpServers: [] } }),
        agent({ id: 1, error: { code: -32000, message: 'Authentication required' } }),
      ],
      'acp: session/new failed: JSON-RPC error -32000: Authentication required',
    ],
    [
      'session/new without an id',
      [...initialize(false), client({ id: 1, method: 'session/new', params: { cwd, mcpServers: [] } }), agent({ id: 1, result: {} })],
      'acp: session/new answered with an invalid result: sessionId: Invalid input: expected string, received undefined',
    ],
  ])('a failed %s fails the drive with a clear message (process_error)', async (_, entries, message) => {
    const s = await replay(entries, newTask('go'));
    expect(s.error).toBe(message);
    expect(s.states.at(-1)).toBe('error');
  });
});
