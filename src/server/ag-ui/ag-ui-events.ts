import { EventType, type AGUIEvent, type Interrupt, type JsonPatchOperation } from '@ag-ui/core';
import { foldRune } from '../../reducers/fold.js';
import { isRuneOf, type Rune } from '../../reducers/rune.js';
import type { ToolCallInput, ToolCallState, ToolCallStateName } from '../../reducers/tool-call/schema.js';
import { toolCall } from '../../reducers/tool-call/machine.js';
import type { TurnEngineState, TurnEngineStateName } from '../../reducers/turn-engine/schema.js';
import { turnEndingOf, turnEngine } from '../../reducers/turn-engine/machine.js';
import { jsonPatch } from '../json-patch.js';

/** The prefix of a tool approval's interrupt id: `approval:<callId>`. */
export const APPROVAL_INTERRUPT_PREFIX = 'approval:';

/**
 * The agent's state as an AG-UI client sees it (`STATE_SNAPSHOT`, then `STATE_DELTA`s): the
 * turn's state name and number, why it stopped or failed, and each tool call of the run with its
 * tool and state. The text is not in it: it streams as `TEXT_MESSAGE_*`.
 */
export interface AgUiState {
  readonly status: TurnEngineStateName;
  readonly turn: number;
  readonly reason?: string;
  readonly error?: string;
  readonly calls: Readonly<Record<string, { readonly toolName: string; readonly status: ToolCallStateName }>>;
}

/** One run being mapped: what the client was told so far, and the agent's turn state. */
export interface AgUiRun {
  readonly threadId: string;
  readonly runId: string;
  /** The turn stream's state after the last turn rune mapped. */
  readonly turn: TurnEngineState;
  /** What the client's state is (the last snapshot plus the deltas sent). */
  readonly state: AgUiState;
  /** The text message open now (`TEXT_MESSAGE_START` sent, no `END` yet). */
  readonly openMessageId?: string;
  /** The last text message of the turn: the parent of the tool calls that follow it. */
  readonly lastMessageId?: string;
  /** A `RUN_FINISHED` or `RUN_ERROR` was sent: nothing follows. */
  readonly done: boolean;
}

/** A mapping step: the run after it, and the events to send. */
export interface AgUiStep {
  readonly run: AgUiRun;
  readonly events: readonly AGUIEvent[];
}

/** What the client sees of a call in `state` (its tool and its state name). */
const callView = (call: Pick<ToolCallState, 'toolName' | 'value'>) => ({ toolName: call.toolName, status: call.value });

/** The client's state from the turn's, keeping the calls already known. */
function viewOf(turn: TurnEngineState, calls: AgUiState['calls']): AgUiState {
  return {
    status: turn.value,
    turn: turn.turn,
    ...(turn.reason === undefined ? {} : { reason: turn.reason }),
    ...(turn.error === undefined ? {} : { error: turn.error }),
    calls,
  };
}

/** The run with its state moved to `next`, and the `STATE_DELTA` saying so (none when nothing changed). */
function withState(run: AgUiRun, next: AgUiState): AgUiStep {
  const delta: JsonPatchOperation[] = jsonPatch(run.state, next);
  return { run: { ...run, state: next }, events: delta.length === 0 ? [] : [{ type: EventType.STATE_DELTA, delta }] };
}

/**
 * Opens a run: `RUN_STARTED` (the request's thread and run ids) and `STATE_SNAPSHOT` of the
 * agent's state now: its turn state, and the calls of the current tool round already known
 * (`calls`, when the run continues a round: a resume).
 */
export function startRun(threadId: string, runId: string, turn: TurnEngineState, calls: readonly ToolCallState[] = []): AgUiStep {
  const state = viewOf(turn, Object.fromEntries(calls.map((call) => [call.callId, callView(call)])));
  return {
    run: { threadId, runId, turn, state, done: false },
    events: [
      { type: EventType.RUN_STARTED, threadId, runId },
      { type: EventType.STATE_SNAPSHOT, snapshot: state },
    ],
  };
}

/** `TEXT_MESSAGE_END` for the open text message, if any. */
function closeText(run: AgUiRun): AgUiStep {
  if (run.openMessageId === undefined) return { run, events: [] };
  const { openMessageId, ...rest } = run;
  return { run: rest, events: [{ type: EventType.TEXT_MESSAGE_END, messageId: openMessageId }] };
}

/** Both steps, one after the other. */
function then(first: AgUiStep, next: (run: AgUiRun) => AgUiStep): AgUiStep {
  const second = next(first.run);
  return { run: second.run, events: [...first.events, ...second.events] };
}

/**
 * The events of one rune of the agent's turn stream (`<root>/agent/<a>/turn`):
 *
 * 1. `turn.assistant_delta`: `TEXT_MESSAGE_CONTENT`, after a `TEXT_MESSAGE_START` (role
 *    `assistant`, its id the stream and seq of the rune that opened it) for a turn's first text
 *    or the first after a tool round. An empty delta sends nothing.
 * 2. `turn.tool_calls_received`, `turn.completed`, `turn.interrupted`, `turn.error`: the open
 *    text message ends (`TEXT_MESSAGE_END`); the calls themselves come from their own streams.
 * 3. Every rune that changes the {@link AgUiState} (a new turn, a state name, an error): a
 *    `STATE_DELTA` (JSON Patch), after the events above. A delta does not (text is not state).
 * 4. The rune that ends the turn (idle again) then ends the run: `RUN_FINISHED` with outcome
 *    `success` for `turn.completed`, `cancelled` for `turn.interrupted`; `RUN_ERROR` (code
 *    `turn_error`, the turn's error as its message) for `turn.error`. (An older log's
 *    `turn_finalized` after it changes nothing: the run is done.)
 */
export function turnRuneEvents(run: AgUiRun, rune: Rune): AgUiStep {
  if (run.done || !isRuneOf(turnEngine, rune)) return { run, events: [] };
  const turn = foldRune(turnEngine, run.turn, rune.seq, rune.event) as TurnEngineState;
  const calls = rune.event.type === 'start_turn' ? {} : run.state.calls;
  const moved = { ...run, turn };
  if (rune.event.type === 'assistant_delta') {
    const { content } = rune.event;
    if (content === '') return { run: moved, events: [] };
    const opened = moved.openMessageId;
    const messageId = opened ?? `${rune.stream}:${rune.seq}`;
    const delta: AGUIEvent = { type: EventType.TEXT_MESSAGE_CONTENT, messageId, delta: content };
    return {
      run: { ...moved, openMessageId: messageId, lastMessageId: messageId },
      events: opened === undefined ? [{ type: EventType.TEXT_MESSAGE_START, messageId, role: 'assistant' }, delta] : [delta],
    };
  }
  // A new turn's text has no parent message yet; any other rune ends the open text message.
  const { lastMessageId: _last, ...fresh } = moved;
  const step = rune.event.type === 'start_turn' ? { run: fresh, events: [] } : closeText(moved);
  const stated = then(step, (after) => withState(after, viewOf(turn, calls)));
  const ending = turnEndingOf(rune);
  return ending === undefined ? stated : then(stated, (after) => finish(after, ending));
}

/** The events that end a run whose turn went from `ending` to idle. */
function finish(run: AgUiRun, ending: string | undefined): AgUiStep {
  const { threadId, runId } = run;
  const done = { ...run, done: true };
  if (ending === 'error') return { run: done, events: [{ type: EventType.RUN_ERROR, message: run.turn.error ?? 'the turn failed', code: 'turn_error' }] };
  return { run: done, events: [{ type: EventType.RUN_FINISHED, threadId, runId, outcome: { type: ending === 'interrupted' ? 'cancelled' : 'success' } }] };
}

/** A call's outcome as a `TOOL_CALL_RESULT` content: the `tool.result` / `tool.denied` payload without its `callId`, as JSON. */
function resultContent(payload: Readonly<Record<string, unknown>> | undefined, status: string): string {
  const { callId: _callId, ...rest } = payload ?? {};
  return JSON.stringify({ status, ...rest });
}

/**
 * The events of one rune of a tool call's stream (`<root>/agent/<a>/call/<callId>`):
 *
 * 1. Its spawn (`tool.call`): `TOOL_CALL_START` (its parent the turn's last text message, if
 *    any), `TOOL_CALL_ARGS` with the arguments as JSON, `TOOL_CALL_END`.
 * 2. `tool.result` and `tool.denied`: `TOOL_CALL_RESULT` (role `tool`), its content the payload as
 *    JSON: `{"status":"success","output":...}`, `{"status":"denied","reason":...}`, ...
 * 3. `tool.progress`: `CUSTOM` named `tool_progress`, `{toolCallId, chunk}`.
 * 4. Then a `STATE_DELTA` for the call's new state name.
 */
export function callRuneEvents(run: AgUiRun, rune: Rune): AgUiStep {
  if (run.done || !isRuneOf(toolCall, rune)) return { run, events: [] };
  const known = run.state.calls;
  const events: AGUIEvent[] = [];
  const spawned = rune.event.type === 'spawn' ? (rune.event.input as ToolCallInput) : undefined;
  // Every rune after the spawn names its call in its payload; the stream's last segment is the call id too.
  const callId = spawned?.callId ?? (rune.payload?.callId as string | undefined) ?? rune.stream.slice(rune.stream.lastIndexOf('/') + 1);
  const toolName = spawned?.toolName ?? known[callId]?.toolName ?? '';
  if (spawned !== undefined) {
    events.push(
      { type: EventType.TOOL_CALL_START, toolCallId: callId, toolCallName: toolName, ...(run.lastMessageId === undefined ? {} : { parentMessageId: run.lastMessageId }) },
      { type: EventType.TOOL_CALL_ARGS, toolCallId: callId, delta: JSON.stringify(spawned.arguments) },
      { type: EventType.TOOL_CALL_END, toolCallId: callId },
    );
  } else if (rune.kind === 'tool.result' || rune.kind === 'tool.denied') {
    const status = rune.kind === 'tool.denied' ? 'denied' : String(rune.payload?.status);
    events.push({ type: EventType.TOOL_CALL_RESULT, messageId: `${rune.stream}:result`, toolCallId: callId, role: 'tool', content: resultContent(rune.payload, status) });
  } else if (rune.event.type === 'progress_update') {
    events.push({ type: EventType.CUSTOM, name: 'tool_progress', value: { toolCallId: callId, chunk: rune.event.chunk } });
  }
  const next = withState(run, { ...run.state, calls: { ...known, [callId]: { toolName, status: rune.to ?? 'pending_call' } } });
  return { run: next.run, events: [...events, ...next.events] };
}

/** Where a tool round stands: still going, every call done, or waiting for approvals. */
export type RoundStatus = { readonly type: 'running' } | { readonly type: 'done' } | { readonly type: 'interrupt'; readonly interrupts: readonly Interrupt[] };

const TERMINAL: ReadonlySet<string> = new Set(toolCall.terminal);

/**
 * Where the round of `callIds` stands in the run's state:
 * - `done`: every call ended (the turn goes on with their results);
 * - `interrupt`: at least one call awaits approval and nothing else can move without an answer:
 *   no call runs, and each call still pending waits behind an earlier one that is not done (calls
 *   of tools that are not parallel-safe run one at a time, in order);
 * - `running`: anything else (a call runs, or one is about to be decided).
 */
export function roundStatus(state: AgUiState, callIds: readonly string[]): RoundStatus {
  const statuses = callIds.map((id) => state.calls[id]?.status);
  if (statuses.every((status) => status !== undefined && TERMINAL.has(status))) return { type: 'done' };
  const awaiting = callIds.filter((_, i) => statuses[i] === 'awaiting_approval');
  const blocked = statuses.every((status, i) => {
    if (status === undefined || status === 'executing') return false;
    if (status !== 'pending_call') return true;
    return statuses.slice(0, i).some((before) => before === 'awaiting_approval' || before === 'pending_call');
  });
  if (awaiting.length === 0 || !blocked) return { type: 'running' };
  return {
    type: 'interrupt',
    interrupts: awaiting.map((toolCallId) => ({
      id: `${APPROVAL_INTERRUPT_PREFIX}${toolCallId}`,
      reason: 'tool_approval',
      toolCallId,
      message: `approve the call of tool "${state.calls[toolCallId]!.toolName}"?`,
    })),
  };
}

/** Ends the run with `RUN_FINISHED` outcome `interrupt`: its open text message first ends. */
export function interruptRun(run: AgUiRun, interrupts: readonly Interrupt[]): AgUiStep {
  const { threadId, runId } = run;
  return then(closeText(run), (closed) => ({
    run: { ...closed, done: true },
    events: [{ type: EventType.RUN_FINISHED, threadId, runId, outcome: { type: 'interrupt', interrupts: [...interrupts] } }],
  }));
}

/** Ends a run at once with `RUN_FINISHED` `success`: a resume found nothing left to follow. */
export function finishRun(run: AgUiRun): AgUiStep {
  return finish(closeText(run).run, 'completed');
}
