import { z } from 'zod';
import { describeIssues } from '../validate.js';
import { agentManagerSession } from './machine.js';
import type { AgentManagerSessionEvent, AgentManagerSessionInput, AgentManagerSessionState, AgentManagerSessionStateName } from './schema.js';

/** What is persisted about a session (seed 001 "State Persistence"). */
export const AgentManagerPersistedSession = z.object({
  /** The session's status as the session list stores it. */
  status: z.enum(['creating', 'running', 'done', 'error', 'stopped']),
  /** The ask type of the last complete (non-partial) message, without `ask:` (`"followup"`, `"tool"`). */
  lastAsk: z.string().optional(),
  /** Whether the CLI process is alive. */
  processRunning: z.boolean(),
});
export type AgentManagerPersistedSession = z.infer<typeof AgentManagerPersistedSession>;

/**
 * The state a running session is in after its last complete ask, as the machine's own table has
 * it (a complete `ask:<type>` while streaming, in the session's own mode, so auto-approve passes
 * approval asks straight on); undefined for asks that leave it working.
 */
function stateAfterAsk(lastAsk: string, input: AgentManagerSessionInput | undefined): AgentManagerSessionStateName | undefined {
  const type = `ask:${lastAsk}`;
  if (!agentManagerSession.events.includes(type)) return undefined;
  const streaming: AgentManagerSessionState = { ...agentManagerSession.initial(input), value: 'streaming', sessionCreated: true, apiReqStarted: true };
  const next = agentManagerSession.transition(streaming, { type } as AgentManagerSessionEvent);
  return next.value === 'streaming' ? undefined : next.value;
}

function stateName({ status, lastAsk, processRunning }: AgentManagerPersistedSession, input: AgentManagerSessionInput | undefined): AgentManagerSessionStateName {
  switch (status) {
    case 'creating':
      return processRunning ? 'creating' : 'error';
    case 'stopped':
    case 'error':
      return status;
    case 'done':
      return lastAsk === 'resume_completed_task' ? 'paused' : 'completed';
    case 'running':
      // A running task whose process is gone was interrupted: it can be resumed.
      return (lastAsk === undefined ? undefined : stateAfterAsk(lastAsk, input)) ?? (processRunning ? 'streaming' : 'paused');
  }
}

/**
 * Rebuilds a session's state from what is persisted about it, for switching sessions or reloading
 * (seed 001 "State Persistence"): the status, the last complete ask and whether the CLI runs.
 *
 * 1. `creating` stays `creating` while the process runs, else it failed: `error`.
 * 2. `stopped` and `error` are themselves; `done` is `completed`, or `paused` after `resume_completed_task`.
 * 3. `running` follows the last ask: approval asks -> `waiting_approval` (in auto-approve mode,
 *    `input.autoApprove`, they do not wait, as in the machine), `followup` -> `waiting_input`,
 *    `completion_result` -> `completed`, error asks -> `error`, resume asks -> `paused`; with no such
 *    ask it is `streaming` while the process runs, else `paused` (interrupted, resumable).
 *
 * Throws an Error naming each invalid field when `persisted` fails {@link AgentManagerPersistedSession};
 * every valid argument gives a valid state.
 *
 * @example
 * ```ts
 * import { reconstructAgentManagerState } from 'runestream';
 * console.log(reconstructAgentManagerState({ status: 'running', lastAsk: 'followup', processRunning: true }).value); // Logs: waiting_input
 * console.log(reconstructAgentManagerState({ status: 'running', processRunning: false }).value);                   // Logs: paused
 * console.log(reconstructAgentManagerState({ status: 'running', lastAsk: 'tool', processRunning: true }, { autoApprove: true }).value); // Logs: streaming
 * ```
 */
export function reconstructAgentManagerState(persisted: AgentManagerPersistedSession, input?: AgentManagerSessionInput): AgentManagerSessionState {
  const parsed = AgentManagerPersistedSession.safeParse(persisted);
  if (!parsed.success) {
    throw new Error(`invalid persisted agent manager session: ${describeIssues(parsed.error.issues)}`);
  }
  const { status, lastAsk } = parsed.data;
  // Past `creating`, the CLI got both of the events that `creating` waits for.
  const started = status !== 'creating';
  return {
    ...agentManagerSession.initial(input),
    value: stateName(parsed.data, input),
    sessionCreated: started,
    apiReqStarted: started,
    ...(lastAsk === undefined ? {} : { lastAsk }),
  };
}
