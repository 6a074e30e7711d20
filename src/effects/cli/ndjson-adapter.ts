import { stripVTControlCharacters } from 'node:util';
import { defer, map, type Observable } from 'rxjs';
import { fromCliMessage } from '../../reducers/agent-manager-session/cli-message.js';
import type { AgentManagerSessionEvent } from '../../reducers/agent-manager-session/schema.js';
import type { AgentCliAdapter, CliLaunch, CliOutput, CliProcessIo, CliRun } from './cli-adapter.js';

/**
 * The text a `resume` run gives cline: `-T <taskId>` alone re-prints the task and waits on its
 * `ask:resume_task` for an answer that `--json` has no channel for, so the answer is on the command line.
 */
export const NDJSON_RESUME_TEXT = 'Continue the task from where it stopped.';

/** The longest excerpt of a line quoted in an `ignored` reason. */
const QUOTE_LENGTH = 200;
/** The longest error text carried by a `process_error` made of cline's `{"type":"error"}` line. */
const MAX_ERROR_LENGTH = 4_000;

/** Asks that put the session in `error`: cline's `{"type":"error"}` line that follows one says nothing new. */
const ERROR_ASKS = new Set(['ask:api_req_failed', 'ask:mistake_limit_reached', 'ask:invalid_model', 'ask:payment_required_prompt']);
/** What cline prints on stdout, in colour, when it gets SIGTERM. */
const SIGTERM_LINE = 'SIGTERM received';

const quote = (line: string): string => JSON.stringify(line.length > QUOTE_LENGTH ? `${line.slice(0, QUOTE_LENGTH)}...` : line);
const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The arguments after `--json [-y]` that start `run`. */
function taskArgs(run: CliRun): string[] {
  const { start } = run;
  if (start.type === 'new_task') return ['--', start.prompt];
  if (run.sessionId === undefined) throw new Error(`a ${start.type} run of cline needs the task's id (session_created's sessionId), and the session has none`);
  return ['-T', run.sessionId, '--', start.type === 'follow_up' ? start.text : NDJSON_RESUME_TEXT];
}

/** Reads one run's lines; keeps what the run has seen so far. */
class RunReader {
  /** Whether `task_started` made a `session_created` already. */
  private created = false;
  /** Whether an error ask put the session in `error` (see ERROR_ASKS). */
  private failed = false;
  /** Whether cline said it got SIGTERM: what it prints then is its own shutdown. */
  private shuttingDown = false;

  constructor(private readonly run: CliRun) {}

  read(line: string): CliOutput {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      const plain = stripVTControlCharacters(line).trim();
      if (plain.startsWith(SIGTERM_LINE)) {
        this.shuttingDown = true;
        return { ignored: `not JSON: cline is shutting down on SIGTERM: ${quote(plain)}` };
      }
      return { ignored: `not JSON: ${quote(line)}` };
    }
    if (!isObject(message)) return fromCliMessage(message);
    if (message.type === 'task_started') return this.taskStarted(message.taskId);
    if (message.type === 'error') return this.error(message.message);

    const { ts } = message;
    const { afterTs } = this.run;
    if (typeof ts === 'number' && afterTs !== undefined && ts <= afterTs) return { ignored: `history: ts ${ts} <= ${afterTs}, a message the log holds` };
    const name = `${String(message.type)}:${String(message.ask ?? message.say)}`;
    if (this.shuttingDown) return { ignored: `${name} after SIGTERM: cline marks the task interrupted for a later -T, the process is ending` };
    if (this.run.start.type !== 'new_task' && (name === 'ask:resume_task' || name === 'ask:resume_completed_task')) {
      return { ignored: `${name}: answered by the ${this.run.start.type === 'follow_up' ? "follow-up's text" : 'resume text'} on the command line` };
    }

    const mapped = fromCliMessage(message);
    if (!('event' in mapped)) return mapped;
    const event = mapped.event as AgentManagerSessionEvent & { partial?: boolean; text?: string };
    if (ERROR_ASKS.has(event.type) && event.partial !== true) this.failed = true;
    if (event.type === 'api_req_started' && event.text !== undefined) {
      // Its text is the whole request cline sent (tens of KB of prompt): the session reads nothing of it.
      const { text: _, ...rest } = event;
      return { event: rest };
    }
    return { event };
  }

  private taskStarted(taskId: unknown): CliOutput {
    if (typeof taskId !== 'string' || taskId.length === 0 || taskId.length > 256)
      return { ignored: `task_started without a task id (1 to 256 characters): ${quote(JSON.stringify(taskId) ?? 'undefined')}` };
    if (this.run.start.type !== 'new_task') {
      const same = taskId === this.run.sessionId ? 'the same task' : `task ${quote(taskId)}, not the session's ${quote(this.run.sessionId ?? '')}`;
      return { ignored: `task_started of a -T run (${same}): the session was created by its first run` };
    }
    if (this.created) return { ignored: `task_started again (${quote(taskId)}): the session is created already` };
    this.created = true;
    return { event: { type: 'session_created', sessionId: taskId } };
  }

  private error(message: unknown): CliOutput {
    const text = typeof message === 'string' ? message : (JSON.stringify(message) ?? 'unknown error');
    if (this.failed) return { ignored: `cline's error line after its error ask, which the session has: ${quote(text)}` };
    this.failed = true;
    return { event: { type: 'process_error', error: text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH)}...` : text } };
  }
}

/**
 * cline 2.x `--json` (ClineMessage NDJSON, seed 001's own format), not interactive: a run's input
 * is its command line, and each follow-up is a new process.
 *
 * Launch (after the configured command and arguments; stdin is closed at once, as cline reads a
 * prompt from stdin only when it is a FIFO or a file, never from a pipe a process runner opens):
 * - `new_task`: `--json [-y] -- <prompt>` (`-y` in auto-approve mode);
 * - `follow_up`: `--json [-y] -T <sessionId> -- <text>`;
 * - `resume`: `--json [-y] -T <sessionId> -- <NDJSON_RESUME_TEXT>`. A follow-up or a resume of a
 *   session without a `sessionId` throws.
 * The working directory is the process's own (cline's `-c` is not needed).
 *
 * Drive: `{"type":"task_started","taskId"}` is `session_created` (in a new task's run only: a
 * `-T` run prints it again, ignored); a ClineMessage goes through `fromCliMessage` (keeping its
 * `ts`; `api_req_started` without its text); one with `ts <= run.afterTs` is history the log
 * holds, ignored; in a `-T` run, cline's `ask:resume_task` / `ask:resume_completed_task` is
 * answered by the command line, ignored; cline's `{"type":"error","message"}` is `process_error`
 * unless an error ask (`api_req_failed`, ...) came first; a non-JSON line is ignored, and after
 * cline's "SIGTERM received" line so is everything it prints while it shuts down.
 */
export const ndjsonCliAdapter: AgentCliAdapter = {
  protocol: 'ndjson',
  interactive: false,
  launch(run: CliRun): CliLaunch {
    return { args: ['--json', ...(run.autoApprove ? ['-y'] : []), ...taskArgs(run)], endStdin: true };
  },
  drive(io: CliProcessIo, run: CliRun): Observable<CliOutput> {
    return defer(() => {
      const reader = new RunReader(run);
      return io.lines$.pipe(map((line) => reader.read(line)));
    });
  },
};
