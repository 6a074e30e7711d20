import { PROTOCOL_VERSION, RequestError } from '@agentclientprotocol/sdk';
import type { InitializeRequest, LoadSessionRequest, NewSessionRequest, PromptRequest, RequestPermissionResponse } from '@agentclientprotocol/sdk';
import { Observable, type Subscriber } from 'rxjs';
import type { z } from 'zod';
import type { AgentManagerSessionEvent } from '../../reducers/agent-manager-session/schema.js';
import { describeIssues } from '../../reducers/validate.js';
import {
  type AcpEnvelope,
  type AcpId,
  type AcpPermissionRequest,
  type AcpToolCallFields,
  AcpEnvelope as Envelope,
  AcpInitializeResult,
  AcpMessageChunk,
  AcpNewSessionResult,
  AcpPermissionRequest as PermissionRequest,
  AcpPromptResult,
  AcpSessionNotification,
  AcpToolCall as ToolCall,
} from './acp-messages.js';
import type { AgentCliAdapter, CliOutput, CliProcessIo, CliRun, CliUserEvent } from './cli-adapter.js';

/** The prompt of a `resume` run once the agent has loaded the session: the agent goes on by itself, as `streaming` says. */
export const ACP_RESUME_PROMPT = 'Continue the task where it stopped.';
/** The longest text of a tool ask; the rest of a tool's input (a whole file's diff, say) is cut. */
export const ACP_MAX_TOOL_TEXT = 16_384;

/**
 * Drives an agent over the Agent Client Protocol (JSON-RPC 2.0 as NDJSON on stdio): kilo
 * (`kilo acp`), cline 3 (`cline --acp`) and the like. The configured command and its arguments
 * start the agent; the adapter adds none. The mapping to `agentManagerSession` events, the
 * approval, follow-up and resume rules and the choices made for stop reasons are in README.md,
 * "ACP agents" (the one table of them). Never throws on what the agent prints: a line it cannot
 * use is an `{ignored: reason}` output.
 *
 * Why not the SDK's `client()` connection: it dispatches each incoming message through a chain
 * of async handlers, so a prompt's response can overtake the `session/update` notifications sent
 * before it (seen with five handlers registered: the stop arrived before the last chunks), and the
 * session machine needs the agent's order. So the JSON-RPC here is a minimal, strict one, handled
 * synchronously line by line; the SDK gives the types, the protocol version and its error objects.
 */
export const acpCliAdapter: AgentCliAdapter = {
  protocol: 'acp',
  interactive: true,
  launch: () => ({ args: [] }),
  drive: (io, run, user$) => new Observable<CliOutput>((subscriber) => acpDriver(io, run, subscriber, user$)),
};

type Send = (output: CliOutput) => void;

/** One tool call as far as it is known: `tool_call_update` carries only what changed. */
interface ToolInfo {
  title?: string;
  kind?: string;
  status?: string;
  rawInput?: unknown;
  /** Its permission was requested: its ask is complete, so later updates change nothing. */
  asked?: true;
}

/** A request we sent, waiting for its response. */
interface Pending {
  readonly method: string;
  readonly onResult: (result: unknown) => void;
  /** Default: the drive fails with the error (a `process_error` for the session). */
  readonly onError?: (error: { code: number; message: string }) => void;
}

function acpDriver(io: CliProcessIo, run: CliRun, subscriber: Subscriber<CliOutput>, user$: Observable<CliUserEvent>): () => void {
  const emit: Send = (output) => subscriber.next(output);
  const event = (e: AgentManagerSessionEvent) => emit({ event: e });
  const ignore = (reason: string) => emit({ ignored: reason });
  const fail = (message: string) => subscriber.error(new Error(`acp: ${message}`));

  const pending = new Map<AcpId, Pending>();
  let nextId = 0;
  const send = (message: object) => io.write(JSON.stringify({ jsonrpc: '2.0', ...message }));
  const request = (method: string, params: object, handlers: Pending['onResult'] | Omit<Pending, 'method'>) => {
    const id = nextId++;
    pending.set(id, { method, ...(typeof handlers === 'function' ? { onResult: handlers } : handlers) });
    send({ id, method, params });
  };
  /** A result read with its schema, or the drive fails naming what is wrong. */
  const read =
    <T>(method: string, schema: z.ZodType<T>, then: (value: T) => void) =>
    (result: unknown) => {
      const parsed = schema.safeParse(result);
      if (parsed.success) then(parsed.data);
      else fail(`${method} answered with an invalid result: ${describeIssues(parsed.error.issues)}`);
    };

  let sessionId: string | undefined;
  /** While `session/load` runs, the agent replays the history the log already holds. */
  let loading = false;
  /** The prompt turn in progress: its finished messages, and the message now streaming. */
  let turn: { texts: string[]; messageId?: string | null; text: string } | undefined;
  const queued: string[] = [];
  const tools = new Map<string, ToolInfo>();
  const permissions: { id: AcpId; options: AcpPermissionRequest['options'] }[] = [];

  /** The message streaming so far ends: said complete, kept for the turn's result. */
  const endMessage = () => {
    if (turn === undefined || turn.text === '') return;
    event({ type: 'say:text', partial: false, text: turn.text });
    turn.texts.push(turn.text);
    turn.text = '';
  };

  const prompt = (text: string) => {
    if (sessionId === undefined || turn !== undefined) {
      queued.push(text);
      return;
    }
    turn = { texts: [], text: '' };
    event({ type: 'api_req_started' });
    const params: PromptRequest = { sessionId, prompt: [{ type: 'text', text }] };
    request('session/prompt', params, {
      onResult: read('session/prompt', AcpPromptResult, ({ stopReason }) => endTurn(stopReason)),
      // The agent is still there (a model server failed it): the session's error is the turn's, retryable.
      onError: ({ code, message }) => endTurn('error', `The agent failed the prompt (JSON-RPC error ${code}: ${message})`),
    });
  };

  /** The turn ends: its result as the seed's ask, then the next queued prompt. `failure` says why a turn that failed did. */
  const endTurn = (stopReason: string, failure = `The turn ended early (stopReason "${stopReason}")`) => {
    endMessage();
    const text = turn?.texts.join('\n\n') || undefined;
    turn = undefined;
    tools.clear();
    if (stopReason === 'end_turn') event({ type: 'ask:completion_result', partial: false, ...(text === undefined ? {} : { text }) });
    else if (stopReason === 'cancelled') event({ type: 'ask:resume_task', partial: false, text: 'The agent cancelled the turn (stopReason "cancelled"): resume to go on.' });
    else event({ type: 'ask:api_req_failed', partial: false, text: `${failure}${text === undefined ? '' : `: ${text}`}` });
    const next = queued.shift();
    if (next !== undefined) prompt(next);
  };

  /** A tool call's ask: `ask:command` for a command (its text the command), else `ask:tool` (its title, kind and input as JSON). */
  const toolAsk = (tool: ToolInfo, partial: boolean): AgentManagerSessionEvent => {
    const input = tool.rawInput as { command?: unknown } | undefined;
    if (tool.kind === 'execute') {
      const command = typeof input?.command === 'string' ? input.command : (tool.title ?? 'a command');
      return { type: 'ask:command', partial, text: cut(command) };
    }
    return { type: 'ask:tool', partial, text: cut(JSON.stringify({ tool: tool.title ?? 'a tool', kind: tool.kind ?? 'other', input: tool.rawInput ?? {} })) };
  };

  const mergeTool = (call: AcpToolCallFields): ToolInfo => {
    const known = tools.get(call.toolCallId) ?? {};
    const merged: ToolInfo = { ...known };
    if (call.title != null) merged.title = call.title;
    if (call.kind != null) merged.kind = call.kind;
    if (call.status != null) merged.status = call.status;
    // kilo's first tool_call has an empty input; its update carries the real one.
    if (call.rawInput !== undefined && !isEmptyObject(call.rawInput)) merged.rawInput = call.rawInput;
    tools.set(call.toolCallId, merged);
    return merged;
  };

  const onUpdate = (params: unknown) => {
    const parsed = AcpSessionNotification.safeParse(params);
    if (!parsed.success) return ignore(`invalid session/update: ${describeIssues(parsed.error.issues)}`);
    const { update } = parsed.data;
    const kind = update.sessionUpdate;
    if (loading) return ignore(`session/update ${kind}: history replayed by session/load, already in the log`);
    if (parsed.data.sessionId !== sessionId) return ignore(`session/update ${kind} of another session (${parsed.data.sessionId})`);
    if (turn === undefined) return ignore(`session/update ${kind} outside a prompt turn`);
    if (kind === 'agent_message_chunk') {
      const chunk = AcpMessageChunk.safeParse(update);
      if (!chunk.success) return ignore(`invalid agent_message_chunk: ${describeIssues(chunk.error.issues)}`);
      const { content, messageId } = chunk.data;
      if (content.type !== 'text' || content.text === undefined) return ignore(`agent_message_chunk with ${content.type} content has no agentManagerSession event`);
      if (messageId != null && turn.messageId != null && messageId !== turn.messageId) endMessage();
      turn.messageId = messageId;
      turn.text += content.text;
      return event({ type: 'say:text', partial: true, text: content.text });
    }
    if (kind === 'tool_call' || kind === 'tool_call_update') {
      const call = ToolCall.safeParse(update);
      if (!call.success) return ignore(`invalid ${kind}: ${describeIssues(call.error.issues)}`);
      endMessage();
      const tool = mergeTool(call.data);
      if (tool.status === 'completed' || tool.status === 'failed') {
        tools.delete(call.data.toolCallId);
        return ignore(`tool call ${call.data.toolCallId} ${tool.status}: its result has no agentManagerSession event`);
      }
      // kilo may send it while the session waits for the approval (seen on a loaded machine),
      // where a partial ask is refused: it adds nothing to the complete ask.
      if (tool.asked) return ignore(`tool call ${call.data.toolCallId} updated after its permission request: its ask is complete already`);
      return event(toolAsk(tool, true));
    }
    return ignore(`session/update ${kind} has no agentManagerSession event`);
  };

  const answerPermission = (id: AcpId, options: AcpPermissionRequest['options'], allow: boolean) => {
    const kinds = allow ? ['allow_once', 'allow_always'] : ['reject_once', 'reject_always'];
    const option = kinds.map((k) => options.find((o) => o.kind === k)).find((o) => o !== undefined);
    const result: RequestPermissionResponse = { outcome: option === undefined ? { outcome: 'cancelled' } : { outcome: 'selected', optionId: option.optionId } };
    send({ id, result });
  };

  const onPermission = (id: AcpId, params: unknown) => {
    const parsed = PermissionRequest.safeParse(params);
    if (!parsed.success) {
      const issues = describeIssues(parsed.error.issues);
      send({ id, error: RequestError.invalidParams(undefined, issues).toErrorResponse() });
      return ignore(`invalid session/request_permission (answered -32602): ${issues}`);
    }
    endMessage();
    const { toolCall, options } = parsed.data;
    const tool = mergeTool(toolCall);
    tool.asked = true;
    event(toolAsk(tool, false));
    if (run.autoApprove) answerPermission(id, options, true);
    else permissions.push({ id, options });
  };

  const onRequest = (id: AcpId, method: string, params: unknown) => {
    if (method === 'session/request_permission') return onPermission(id, params);
    send({ id, error: RequestError.methodNotFound(method).toErrorResponse() });
    ignore(`${method}: not offered to the agent (answered -32601)`);
  };

  const onResponse = (message: AcpEnvelope & { id: AcpId }) => {
    const waiting = pending.get(message.id);
    if (waiting === undefined) return ignore(`a response to no request of ours (id ${JSON.stringify(message.id)})`);
    if ((message.error === undefined) === (message.result === undefined)) return ignore(`a response to ${waiting.method} with neither or both of result and error`);
    pending.delete(message.id);
    if (message.error === undefined) return waiting.onResult(message.result);
    if (waiting.onError) return waiting.onError(message.error);
    fail(`${waiting.method} failed: JSON-RPC error ${message.error.code}: ${message.error.message}`);
  };

  const onLine = (line: string) => {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      return ignore(`not JSON: ${cut(line, 200)}`);
    }
    const parsed = Envelope.safeParse(value);
    if (!parsed.success) return ignore(`not a JSON-RPC 2.0 message: ${describeIssues(parsed.error.issues)}`);
    const message = parsed.data;
    const { id, method } = message;
    if (method !== undefined && id !== undefined) return onRequest(id, method, message.params);
    if (method === 'session/update') return onUpdate(message.params);
    if (method !== undefined) return ignore(`notification ${method} has no agentManagerSession event`);
    if (id !== undefined) return onResponse({ ...message, id });
    ignore('a JSON-RPC message with neither a method nor an id');
  };

  const onUser = (e: CliUserEvent) => {
    if (e.type === 'send_message') return prompt(e.text);
    const waiting = permissions.shift();
    if (waiting === undefined) return ignore(`${e.type}: no permission request is waiting`);
    answerPermission(waiting.id, waiting.options, e.type === 'approve_action');
  };

  // The run's start: a new session, or the earlier one loaded when the agent can.
  const newSession = (then: () => void) => {
    const params: NewSessionRequest = { cwd: run.cwd, mcpServers: [] };
    request(
      'session/new',
      params,
      read('session/new', AcpNewSessionResult, (result) => {
        sessionId = result.sessionId;
        then();
      }),
    );
  };
  /** A run that continues a session the agent cannot load: the agent starts without the earlier conversation, and says so. */
  const unloaded = (why: string) => {
    newSession(() => {
      const note = `${why}: the agent continues in a new session (${sessionId}) without the earlier conversation.`;
      if (run.start.type === 'follow_up') {
        event({ type: 'say:text', partial: false, text: note });
        prompt(run.start.text);
      } else event({ type: 'ask:followup', partial: false, text: `${note} What should it do?` });
    });
  };
  const begin = (loadable: boolean) => {
    const { start } = run;
    if (start.type === 'new_task')
      return newSession(() => {
        event({ type: 'session_created', sessionId: sessionId as string });
        prompt(start.prompt);
      });
    if (run.sessionId === undefined) return unloaded('The run has no earlier session id');
    if (!loadable) return unloaded(`The agent cannot load session ${run.sessionId} (no loadSession capability)`);
    loading = true;
    const params: LoadSessionRequest = { sessionId: run.sessionId, cwd: run.cwd, mcpServers: [] };
    request('session/load', params, {
      onResult: () => {
        loading = false;
        sessionId = run.sessionId;
        prompt(start.type === 'follow_up' ? start.text : ACP_RESUME_PROMPT);
      },
      onError: (error) => {
        loading = false;
        unloaded(`The agent could not load session ${run.sessionId} (JSON-RPC error ${error.code}: ${error.message})`);
      },
    });
  };

  const lines = io.lines$.subscribe({ next: onLine, error: (error: unknown) => subscriber.error(error), complete: () => subscriber.complete() });
  const users = user$.subscribe({ next: onUser, error: (error: unknown) => subscriber.error(error) });
  const initialize: InitializeRequest = { protocolVersion: PROTOCOL_VERSION, clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false } };
  request(
    'initialize',
    initialize,
    read('initialize', AcpInitializeResult, (result) => {
      begin(result.agentCapabilities?.loadSession === true);
    }),
  );
  return () => {
    lines.unsubscribe();
    users.unsubscribe();
  };
}

const isEmptyObject = (value: unknown): boolean => typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0;

/** Text cut to `max` characters, saying how much was left out. */
function cut(text: string, max = ACP_MAX_TOOL_TEXT): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length - max} more characters)`;
}
