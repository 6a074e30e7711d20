import { Subject } from 'rxjs';
import { acpCliAdapter } from '../../src/effects/cli/acp-adapter.js';
import type { CliProcessIo, CliRun, CliUserEvent } from '../../src/effects/cli/cli-adapter.js';
import { agentManagerSession } from '../../src/reducers/agent-manager-session/machine.js';
import type { AgentManagerSessionEvent, AgentManagerSessionState } from '../../src/reducers/agent-manager-session/schema.js';

/** What the user does, in order, when the session waits: approvals and rejections, and follow-up messages when it completes or asks. */
export interface SessionUser {
  readonly permissions?: readonly ('approve' | 'reject')[];
  readonly followUps?: readonly string[];
  /** Called once the session completed with no follow-up left (a live test ends the process there). */
  readonly onDone?: () => void;
}

/** What a drive did to a session, folded through `agentManagerSession` as the session epic does. */
export interface FoldedSession {
  /** The state names in order, each once per change. */
  readonly states: string[];
  readonly state: AgentManagerSessionState;
  /** The adapter's events, and the user's, in the order the machine got them. */
  readonly events: AgentManagerSessionEvent[];
  /** Events the machine refused, with its reason (none, for an adapter that fits the machine). */
  readonly rejected: string[];
  readonly ignored: string[];
  /** The drive's error, when it failed (the session epic's `process_error`). */
  readonly error?: string;
}

/**
 * Drives `acpCliAdapter` on `io` for `run`, folding its events through the session machine from
 * `from` (by default: `idle`, then `start_session` with the run's prompt), and answering as `user`
 * says when the machine waits: an approval when it is `waiting_approval`, the next follow-up when
 * it is `completed` or `waiting_input` (each to the machine and to the adapter's `user$`). A drive error is folded as
 * `process_error`. Resolves when the drive ends.
 */
export function foldAcpSession(io: CliProcessIo, run: CliRun, user: SessionUser = {}, from?: AgentManagerSessionState): Promise<FoldedSession> {
  const user$ = new Subject<CliUserEvent>();
  const permissions = [...(user.permissions ?? [])];
  const followUps = [...(user.followUps ?? [])];
  let state = from ?? agentManagerSession.initial({ autoApprove: run.autoApprove });
  const states: string[] = [state.value];
  const events: AgentManagerSessionEvent[] = [];
  const rejected: string[] = [];
  const ignored: string[] = [];
  const apply = (event: AgentManagerSessionEvent) => {
    events.push(event);
    const step = agentManagerSession.step(state, event);
    if (!step.accepted) return rejected.push(`${event.type} in ${state.value}: ${step.reason}`);
    state = step.state;
    if (states.at(-1) !== state.value) states.push(state.value);
  };
  const answer = (event: CliUserEvent) =>
    queueMicrotask(() => {
      apply(event);
      user$.next(event);
    });
  if (from === undefined && run.start.type === 'new_task') apply({ type: 'start_session', prompt: run.start.prompt });
  return new Promise((resolve) => {
    const done = (error?: unknown) => resolve({ states, state, events, rejected, ignored, ...(error === undefined ? {} : { error: (error as Error).message }) });
    acpCliAdapter.drive(io, run, user$).subscribe({
      next: (output) => {
        if ('ignored' in output) return void ignored.push(output.ignored);
        apply(output.event);
        if (state.value === 'waiting_approval') {
          const choice = permissions.shift();
          if (choice !== undefined) answer({ type: choice === 'approve' ? 'approve_action' : 'reject_action' });
        }
        if ((state.value === 'completed' && output.event.type === 'ask:completion_result') || state.value === 'waiting_input') {
          const text = followUps.shift();
          if (text !== undefined) answer({ type: 'send_message', text });
          else if (state.value === 'completed') user.onDone?.();
        }
      },
      error: (error: unknown) => {
        apply({ type: 'process_error', error: (error as Error).message });
        done(error);
      },
      complete: () => done(),
    });
  });
}
