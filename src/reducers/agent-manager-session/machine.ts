import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { agentManagerUiFlags } from './ui-flags.js';
import { AgentManagerSessionEvent, AgentManagerSessionInput, AgentManagerSessionState, AgentManagerSessionStateName, type AgentManagerSessionAskType } from './schema.js';

type S = AgentManagerSessionState;
type E = AgentManagerSessionEvent;
/** The fields every CLI message may carry. */
type CliMessage = { partial?: boolean; text?: string };

// Guards of the CLI's messages. They are mutually exclusive, so the order of the rows does not matter.
const partial = { when: (_: S, e: CliMessage) => e.partial === true, label: 'partial' } as const;
const complete = { when: (_: S, e: CliMessage) => e.partial !== true, label: 'complete' } as const;
const needsApproval = {
  when: (s: S, e: CliMessage) => e.partial !== true && !s.autoApprove,
  label: 'complete, approval needed',
} as const;
const autoApproved = {
  when: (s: S, e: CliMessage) => e.partial !== true && s.autoApprove,
  label: 'complete, auto-approve',
} as const;

/** A new task forgets everything the previous one left in the context; `autoApprove` is the session's. */
const newTask = (_: S, e: { prompt: string }): Partial<S> => ({
  prompt: e.prompt,
  sessionCreated: false,
  apiReqStarted: false,
  sessionId: undefined,
  lastText: undefined,
  lastAsk: undefined,
  error: undefined,
  exitCode: undefined,
});
/** A message without text keeps the last text shown. */
const said = (s: S, e: CliMessage): Partial<S> => ({ lastText: e.text ?? s.lastText });
const asked = (s: S, e: CliMessage & { type: AgentManagerSessionAskType }): Partial<S> => ({
  ...said(s, e),
  lastAsk: e.type.slice('ask:'.length),
});
/** An error ask: its text is the error, else its name. */
const askFailed = (s: S, e: CliMessage & { type: AgentManagerSessionAskType }): Partial<S> => ({
  ...asked(s, e),
  error: e.text ?? e.type.slice('ask:'.length),
});
const processFailed = (_: S, e: { error: string }): Partial<S> => ({ error: e.error });
const exited = (_: S, e: { code: number }): Partial<S> => ({ exitCode: e.code });
/** A clean exit that leaves an approval unanswerable: the state says why it paused. */
const exitedAwaitingApproval = (s: S, e: { code: number }): Partial<S> => ({
  exitCode: e.code,
  error: `the CLI exited (code ${e.code}) while its ask:${s.lastAsk ?? 'tool'} awaited approval, so no process can be told the answer; resume_session starts it again`,
});
/** The user owes the CLI an answer: a clean exit now would drop the question. */
const pendingAsk = (s: S): boolean => s.value === 'waiting_approval' || s.value === 'waiting_input';

const design = (note: string) => ({ source: 'design', note }) as const;
const extension = (note: string) => ({ source: 'extension', note }) as const;
const partialAsk = design('a partial ask is still streaming its content: it never enters a waiting state');
const autoApprove = design('auto-approve mode: the tool runs without the user, so streaming goes on');
const approvalAsk = design('waits for approval like ask:tool');
const errorAsk = design('an error the user must act on, like ask:api_req_failed');

/**
 * Seed 001 "Transition Table", row for row, then the DESIGN.md resolutions and our extensions.
 * The seed's table wins over its hand-drawn diagram where they disagree (the `cancel_session`
 * arrows into `idle` and the `completed -> stopped` line match no row of the table).
 */
const table: readonly Row<S, E>[] = [
  { from: 'idle', on: 'start_session', to: 'creating', assign: newTask },
  {
    from: 'creating',
    on: 'session_created',
    to: 'streaming',
    when: (s) => s.apiReqStarted,
    label: 'api_req_started already received',
    assign: (_, e) => ({ sessionCreated: true, sessionId: e.sessionId }),
  },
  {
    from: 'creating',
    on: 'session_created',
    when: (s) => !s.apiReqStarted,
    label: 'waiting for api_req_started',
    assign: (_, e) => ({ sessionCreated: true, sessionId: e.sessionId }),
  },
  {
    from: 'creating',
    on: 'api_req_started',
    when: (s) => !s.sessionCreated,
    label: 'waiting for session_created',
    assign: () => ({ apiReqStarted: true }),
  },
  { from: 'creating', on: 'process_error', to: 'error', assign: processFailed },
  { from: 'streaming', on: 'say:text', ...partial, assign: said },
  { from: 'streaming', on: 'say:text', ...complete, assign: said },
  { from: 'streaming', on: 'ask:tool', ...partial, assign: said },
  { from: 'streaming', on: 'ask:tool', to: 'waiting_approval', ...needsApproval, assign: asked },
  { from: 'streaming', on: 'ask:command', to: 'waiting_approval', ...needsApproval, assign: asked },
  { from: 'streaming', on: 'ask:followup', to: 'waiting_input', ...complete, assign: asked },
  { from: 'streaming', on: 'ask:completion_result', to: 'completed', ...complete, assign: asked },
  { from: 'streaming', on: 'ask:api_req_failed', to: 'error', ...complete, assign: askFailed },
  { from: 'streaming', on: 'ask:mistake_limit_reached', to: 'error', ...complete, assign: askFailed },
  { from: 'streaming', on: 'ask:resume_task', to: 'paused', ...complete, assign: asked },
  { from: 'streaming', on: 'cancel_session', to: 'stopped' },
  { from: 'waiting_approval', on: 'approve_action', to: 'streaming' },
  { from: 'waiting_approval', on: 'reject_action', to: 'streaming' },
  { from: 'waiting_approval', on: 'api_req_started', to: 'streaming' },
  { from: 'waiting_approval', on: 'cancel_session', to: 'stopped' },
  { from: 'waiting_input', on: 'send_message', to: 'streaming' },
  { from: 'waiting_input', on: 'cancel_session', to: 'stopped' },
  { from: 'completed', on: 'send_message', to: 'streaming' },
  { from: 'completed', on: 'start_session', to: 'creating', assign: newTask },
  { from: 'paused', on: 'resume_session', to: 'streaming' },
  { from: 'paused', on: 'cancel_session', to: 'stopped' },
  { from: 'error', on: 'retry', to: 'streaming' },
  { from: 'error', on: 'cancel_session', to: 'stopped' },
  { from: 'stopped', on: 'resume_session', to: 'streaming' },
  { from: 'stopped', on: 'start_session', to: 'creating', assign: newTask },
  { from: '*', on: 'process_exit', to: 'error', when: (_, e) => e.code !== 0, label: 'non-zero exit code', assign: exited },
  {
    from: '*',
    on: 'process_exit',
    to: 'completed',
    when: (s, e) => e.code === 0 && !pendingAsk(s),
    label: 'zero exit code, no pending ask',
    assign: exited,
  },

  // DESIGN.md: `creating` needs session_created and api_req_started in either order.
  {
    from: 'creating',
    on: 'api_req_started',
    to: 'streaming',
    when: (s) => s.sessionCreated,
    label: 'session_created already received',
    assign: () => ({ apiReqStarted: true }),
    ...design("either order: the mirror of the seed's session_created rows"),
  },
  // DESIGN.md: partial asks stream on, like the seed's partial ask:tool.
  { from: 'streaming', on: 'ask:command', ...partial, assign: said, ...partialAsk },
  { from: 'streaming', on: 'ask:followup', ...partial, assign: said, ...partialAsk },
  { from: 'streaming', on: 'ask:completion_result', ...partial, assign: said, ...partialAsk },
  { from: 'streaming', on: 'ask:api_req_failed', ...partial, assign: said, ...partialAsk },
  { from: 'streaming', on: 'ask:resume_task', ...partial, assign: said, ...partialAsk },
  { from: 'streaming', on: 'ask:resume_completed_task', ...partial, assign: said, ...partialAsk },
  { from: 'streaming', on: 'ask:mistake_limit_reached', ...partial, assign: said, ...partialAsk },
  { from: 'streaming', on: 'ask:payment_required_prompt', ...partial, assign: said, ...partialAsk },
  { from: 'streaming', on: 'ask:invalid_model', ...partial, assign: said, ...partialAsk },
  { from: 'streaming', on: 'ask:browser_action_launch', ...partial, assign: said, ...partialAsk },
  { from: 'streaming', on: 'ask:use_mcp_server', ...partial, assign: said, ...partialAsk },
  // DESIGN.md: approval asks, and auto-approve mode.
  { from: 'streaming', on: 'ask:tool', ...autoApproved, assign: asked, ...autoApprove },
  { from: 'streaming', on: 'ask:command', ...autoApproved, assign: asked, ...autoApprove },
  { from: 'streaming', on: 'ask:browser_action_launch', to: 'waiting_approval', ...needsApproval, assign: asked, ...approvalAsk },
  { from: 'streaming', on: 'ask:browser_action_launch', ...autoApproved, assign: asked, ...autoApprove },
  { from: 'streaming', on: 'ask:use_mcp_server', to: 'waiting_approval', ...needsApproval, assign: asked, ...approvalAsk },
  { from: 'streaming', on: 'ask:use_mcp_server', ...autoApproved, assign: asked, ...autoApprove },
  // DESIGN.md: the other asks of the seed's event list.
  { from: 'streaming', on: 'ask:payment_required_prompt', to: 'error', ...complete, assign: askFailed, ...errorAsk },
  { from: 'streaming', on: 'ask:invalid_model', to: 'error', ...complete, assign: askFailed, ...errorAsk },
  {
    from: 'streaming',
    on: 'ask:resume_completed_task',
    to: 'paused',
    ...complete,
    assign: asked,
    ...design("the seed's `paused` entry condition names it next to ask:resume_task"),
  },
  { from: 'error', on: 'resume_session', to: 'streaming', ...design("the seed's diagram draws error --retry/resume--> streaming") },

  // Extensions: CLI traffic that would otherwise be rejected and lost.
  {
    from: 'streaming',
    on: 'say:completion_result',
    assign: said,
    ...extension('the CLI says the result before asking ask:completion_result; its text is the result'),
  },
  {
    from: 'streaming',
    on: 'say:checkpoint_saved',
    assign: said,
    ...extension('the CLI saves checkpoints while it works; the seed lists the event but gives it no row'),
  },
  {
    from: 'streaming',
    on: 'api_req_started',
    ...extension('every further API request of a running task; the seed only uses it to leave creating'),
  },
  {
    from: 'streaming',
    on: 'session_created',
    when: (s) => !s.sessionCreated,
    label: 'no CLI session yet',
    assign: (_, e) => ({ sessionCreated: true, sessionId: e.sessionId }),
    ...extension(
      "a session whose CLI never started (its spawn failed in creating) is retried or resumed into streaming, where the new task's run creates the CLI's session: without its id no follow-up could continue that task",
    ),
  },
  {
    from: ['streaming', 'waiting_approval', 'waiting_input', 'completed', 'paused'],
    on: 'process_error',
    to: 'error',
    assign: processFailed,
    ...extension('the seed\'s `error` entry condition is "CLI process error" in any state where the process runs; the error text would be lost'),
  },
  {
    from: 'creating',
    on: 'process_lost',
    to: 'error',
    assign: (_, e) => ({ error: e.reason }),
    ...extension('the CLI died with the server that started it before the session was created: seed 001 "State Persistence" has creating without a process as error'),
  },
  {
    from: ['streaming', 'waiting_approval', 'waiting_input'],
    on: 'process_lost',
    to: 'paused',
    assign: (_, e) => ({ error: e.reason }),
    ...extension('the CLI died with the server that ran it: seed 001 "State Persistence" has a running session without a process as paused, offered for resume'),
  },
  {
    from: 'waiting_approval',
    on: 'process_exit',
    to: 'paused',
    when: (_, e) => e.code === 0,
    label: 'zero exit code, approval pending',
    assign: exitedAwaitingApproval,
    ...extension(
      "the seed's table has no row for a clean exit with an ask pending: an approval can reach only the process that asked, so the task is interrupted and offered for resume, as when the process is lost",
    ),
  },
  {
    from: 'waiting_input',
    on: 'process_exit',
    when: (_, e) => e.code === 0,
    label: 'zero exit code, question pending',
    assign: exited,
    ...extension(
      "a clean exit with a question pending is recorded and the question stays: its answer (send_message) starts the CLI again as a follow-up, as a one-shot CLI's does",
    ),
  },
  {
    from: 'creating',
    on: 'cancel_session',
    to: 'stopped',
    ...extension("the seed's UI shows the cancel button in creating; without it a CLI that hangs on start could not be left"),
  },
];

/**
 * The Agent Manager session of seed 001: one agent CLI task from `start_session` through streaming,
 * approval and follow-up questions to `completed`, `paused`, `error` or `stopped`. No state is terminal.
 * Its `derive` is {@link agentManagerUiFlags}: clients get the seed's UI flags beside each state.
 *
 * @example
 * ```ts
 * import { agentManagerSession } from 'runestream';
 * let s = agentManagerSession.initial();                     // { value: 'idle', autoApprove: false, ... }
 * s = agentManagerSession.transition(s, { type: 'start_session', prompt: 'Fix the build' });
 * s = agentManagerSession.transition(s, { type: 'session_created', sessionId: 'task-1' });
 * s = agentManagerSession.transition(s, { type: 'api_req_started' });
 * console.log(s.value);                                      // Logs: streaming
 * s = agentManagerSession.transition(s, { type: 'ask:followup', text: 'Which branch?' });
 * console.log(s.value);                                      // Logs: waiting_input
 * // The CLI exits while its question is pending: the question stays, its answer starts the CLI again.
 * console.log(agentManagerSession.transition(s, { type: 'process_exit', code: 0 }).value); // Logs: waiting_input
 * ```
 */
export const agentManagerSession = defineMachine<S, E, AgentManagerSessionInput | void>({
  id: 'agent-manager-session',
  states: AgentManagerSessionStateName.options,
  terminal: [],
  events: eventTypesOf(AgentManagerSessionEvent),
  schemas: { state: AgentManagerSessionState, event: AgentManagerSessionEvent, input: AgentManagerSessionInput },
  initial: (input) => ({
    value: 'idle',
    autoApprove: input?.autoApprove ?? false,
    ...(input?.cli === undefined ? {} : { cli: input.cli }),
    sessionCreated: false,
    apiReqStarted: false,
  }),
  table,
  // Seed 001's "Derived UI State": sent to clients beside each state, never stored.
  derive: agentManagerUiFlags,
});
