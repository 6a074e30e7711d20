import { z } from 'zod';

/** Seed 001 "States"; none is terminal: every state can lead to a new or resumed task. */
export const AgentManagerSessionStateName = z.enum(['idle', 'creating', 'streaming', 'waiting_approval', 'waiting_input', 'completed', 'paused', 'error', 'stopped']);
export type AgentManagerSessionStateName = z.infer<typeof AgentManagerSessionStateName>;

/** Spawn options; omitted, the session asks for approval of every tool and command. */
export const AgentManagerSessionInput = z
  .object({
    /** Tools and commands run without approval (seed 001 "Auto-Approve Mode"). Default false. */
    autoApprove: z.boolean().optional(),
    /**
     * The name of the agent CLI the server runs for this session, one of those its configuration
     * holds (a client names a CLI, never a command). Default: the server's default CLI.
     */
    cli: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'must be 1 to 64 letters, digits, "_", "-" or "." (starting with a letter or digit)')
      .optional(),
  })
  .optional();
export type AgentManagerSessionInput = z.infer<typeof AgentManagerSessionInput>;

/** The session's state: its state name, its configuration and what the CLI has said so far. */
export const AgentManagerSessionState = z.object({
  value: AgentManagerSessionStateName,
  /** From the input, carried in the state so `transition` stays pure. */
  autoApprove: z.boolean(),
  /** From the input: the configured agent CLI this session runs, when it names one. */
  cli: z.string().optional(),
  /** `creating` needs both `session_created` and `api_req_started`, in either order. */
  sessionCreated: z.boolean(),
  apiReqStarted: z.boolean(),
  /** The prompt of the current task. */
  prompt: z.string().optional(),
  sessionId: z.string().optional(),
  /** The text of the last `say:*` / `ask:*` message that carried one. */
  lastText: z.string().optional(),
  /** The type of the last complete ask, without the `ask:` prefix (`"followup"`, `"tool"`, ...). */
  lastAsk: z.string().optional(),
  /** The last error: a process error, or the text of an error ask. */
  error: z.string().optional(),
  /** The exit code of the CLI process, once it has exited. */
  exitCode: z.number().int().optional(),
});
export type AgentManagerSessionState = z.infer<typeof AgentManagerSessionState>;

/**
 * A message relayed from the CLI: `partial: true` while its content is still streaming; `ts` is the
 * CLI's own time of the message (epoch ms), by which a CLI that re-prints its history on a
 * follow-up has the messages the log already holds skipped.
 */
const cliEvent = <T extends string>(type: T) =>
  z.object({ type: z.literal(type), partial: z.boolean().optional(), text: z.string().optional(), ts: z.number().int().nonnegative().optional() });

/** Seed 001 "Events": from the user, from the CLI process, and the CLI's `say:*` / `ask:*` messages. */
export const AgentManagerSessionEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('start_session'), prompt: z.string() }),
  z.object({ type: z.literal('send_message'), text: z.string() }),
  z.object({ type: z.literal('approve_action') }),
  z.object({ type: z.literal('reject_action') }),
  z.object({ type: z.literal('cancel_session') }),
  z.object({ type: z.literal('resume_session') }),
  z.object({ type: z.literal('retry') }),
  z.object({ type: z.literal('session_created'), sessionId: z.string().min(1) }),
  // The CLI sends it as a `say`, so it may carry the say's fields.
  cliEvent('api_req_started'),
  z.object({ type: z.literal('process_exit'), code: z.number().int() }),
  z.object({ type: z.literal('process_error'), error: z.string() }),
  // Extension: the CLI process died with the server process that ran it (found after a restart).
  z.object({ type: z.literal('process_lost'), reason: z.string() }),
  cliEvent('say:text'),
  cliEvent('say:completion_result'),
  cliEvent('say:checkpoint_saved'),
  cliEvent('ask:tool'),
  cliEvent('ask:command'),
  cliEvent('ask:followup'),
  cliEvent('ask:completion_result'),
  cliEvent('ask:api_req_failed'),
  cliEvent('ask:resume_task'),
  cliEvent('ask:resume_completed_task'),
  cliEvent('ask:mistake_limit_reached'),
  cliEvent('ask:payment_required_prompt'),
  cliEvent('ask:invalid_model'),
  cliEvent('ask:browser_action_launch'),
  cliEvent('ask:use_mcp_server'),
]);
export type AgentManagerSessionEvent = z.infer<typeof AgentManagerSessionEvent>;

/** The `ask:*` event types. */
export type AgentManagerSessionAskType = Extract<AgentManagerSessionEvent['type'], `ask:${string}`>;
