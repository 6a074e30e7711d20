import type { Observable } from 'rxjs';
import type { AgentManagerSessionEvent } from '../../reducers/agent-manager-session/schema.js';

/**
 * Why a CLI process starts for a session:
 * - `new_task`: `start_session` with its prompt;
 * - `follow_up`: `send_message` answering a question or continuing a completed task, with its text
 *   (a CLI that cannot take it in its running process, cline's `--json`, is started again for it);
 * - `resume`: `resume_session` or `retry` of an interrupted, stopped or failed task.
 */
export type CliRunStart = { readonly type: 'new_task'; readonly prompt: string } | { readonly type: 'follow_up'; readonly text: string } | { readonly type: 'resume' };

/** One run of an agent CLI for a session: what the adapter is told when the process starts. */
export interface CliRun {
  readonly start: CliRunStart;
  /** The CLI's own id of the task (the `session_created` event's `sessionId`), once it has one. */
  readonly sessionId?: string;
  /** The session's auto-approve mode (its spawn input). */
  readonly autoApprove: boolean;
  /**
   * The largest `ts` among the CLI messages the log already holds for this session: a CLI that
   * re-prints its history when it is started again (cline `-T <taskId>`) has those messages skipped.
   */
  readonly afterTs?: number;
  /** The process's working directory (the configured CLI's `cwd`). */
  readonly cwd: string;
}

/** How an adapter launches a run: arguments after the configured command's own, and what is written to stdin first. */
export interface CliLaunch {
  readonly args: readonly string[];
  /** Written to stdin as it is, then stdin stays open (`end` closes it). Default: nothing. */
  readonly stdin?: string;
  /** Whether stdin is closed after `stdin` is written (a CLI that reads its prompt until EOF). Default false. */
  readonly endStdin?: boolean;
}

/** A running CLI process as an adapter sees it. */
export interface CliProcessIo {
  /**
   * The process's stdout, line by line without the line break: a line split across chunks arrives
   * whole, a last line without a break arrives at the end. Completes when stdout ends.
   */
  readonly lines$: Observable<string>;
  /** Writes `line` and a line break to the process's stdin (dropped once stdin is closed). */
  write(line: string): void;
  /** Closes the process's stdin. */
  end(): void;
}

/** What the session's user does while a run's process is alive: the stream's runes of these events, in order. */
export type CliUserEvent = Extract<AgentManagerSessionEvent, { type: 'send_message' | 'approve_action' | 'reject_action' }>;

/** What an adapter makes of the process: an event for the session, or a line or message it ignored, and why. */
export type CliOutput = { readonly event: AgentManagerSessionEvent } | { readonly ignored: string };

/**
 * Speaks one agent CLI protocol: how a run is started, and how the process's output maps to
 * `agentManagerSession` events (seed 001). The session epic owns the process (spawn, idle timeout,
 * exit, SIGTERM then SIGKILL); an adapter only reads and writes its stdio, so it is tested on
 * recorded transcripts as well as on the real CLI.
 */
export interface AgentCliAdapter {
  /** `ndjson`: cline's `--json` ClineMessage lines. `acp`: the Agent Client Protocol (JSON-RPC 2.0 over NDJSON). */
  readonly protocol: 'ndjson' | 'acp';
  /**
   * Whether the user's `send_message`, `approve_action` and `reject_action` reach the running
   * process (`acp`). When false (`ndjson`), a follow-up starts a new process, and a session that is
   * not in auto-approve mode is refused at start (the CLI has no channel to answer an approval on).
   */
  readonly interactive: boolean;
  /** The arguments and stdin that start `run`. */
  launch(run: CliRun): CliLaunch;
  /**
   * Drives one process: maps its stdout lines to session events and, when `interactive`, answers
   * it from `user$`. Completes when the process's stdout ends; errors only for a protocol failure
   * the session should see as `process_error` (a JSON-RPC error to `session/new`, say). The session
   * epic turns the process's exit into `process_exit` after this completes.
   */
  drive(io: CliProcessIo, run: CliRun, user$: Observable<CliUserEvent>): Observable<CliOutput>;
}

/** Default of {@link AgentCliSpec.idleTimeoutMs}: 10 minutes without a line of output. */
export const DEFAULT_CLI_IDLE_TIMEOUT_MS = 600_000;
/** Default of {@link AgentCliSpec.killGraceMs}: how long SIGTERM gets before SIGKILL. */
export const DEFAULT_CLI_KILL_GRACE_MS = 5_000;

/**
 * An agent CLI the server may run, by name: only configured CLIs run, and a client names one
 * (the session's `cli` input), never a command.
 */
export interface AgentCliSpec {
  /** The protocol the CLI speaks. */
  readonly adapter: AgentCliAdapter;
  /** The executable, found on PATH or given as a path. */
  readonly command: string;
  /** Arguments before the adapter's own. Default none. */
  readonly args?: readonly string[];
  /**
   * Variables added to a safe few of the server's own (PATH, HOME, USER, SHELL, TERM, LOGNAME, as
   * MCP stdio servers get them): the server's secrets are not handed to a CLI unless named here.
   */
  readonly env?: Readonly<Record<string, string>>;
  /** The working directory of its processes. */
  readonly cwd: string;
  /**
   * A process that prints nothing for this long while its session is `creating` or `streaming` is
   * ended with `process_error` (waiting for a person is not silence). Default {@link DEFAULT_CLI_IDLE_TIMEOUT_MS}.
   */
  readonly idleTimeoutMs?: number;
  /** How long an ended process gets between SIGTERM and SIGKILL. Default {@link DEFAULT_CLI_KILL_GRACE_MS}. */
  readonly killGraceMs?: number;
}
