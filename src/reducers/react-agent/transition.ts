import type { RejectionCode } from '../machine.js';
import { unknownEventReason } from '../table.js';
import { AGENT_INPUT_TYPES, type AgentInput } from './input.js';
import type { AgentState, ReActContext, ToolCallRecord } from './state.js';

/** How `agentTransition` sizes the ReAct context window. */
export interface AgentTransitionOptions {
  /** The window of a new ReAct loop, in messages. Default 10 (the origin's). */
  initialContextWindowSize?: number;
  /** How many messages `context-window-expanded` adds, up to every message. Default 10 (the origin's). */
  expandContextWindowSize?: number;
}

/** The outcome of one input: the next state, or why the input does not apply. */
export type AgentInputOutcome = { applied: true; state: AgentState } | { applied: false; code: Extract<RejectionCode, 'unknown_event' | 'not_allowed'>; reason: string };

type Input<T extends AgentInput['type']> = Extract<AgentInput, { type: T }>;
type Options = Required<AgentTransitionOptions>;

const DEFAULTS: Options = { initialContextWindowSize: 10, expandContextWindowSize: 10 };

const notAllowed = (reason: string): AgentInputOutcome => ({ applied: false, code: 'not_allowed', reason });
const applied = (state: AgentState): AgentInputOutcome => ({ applied: true, state });

/**
 * Applies one input, or says why it does not apply. The single source of the agent's rules:
 * `agentTransition` keeps only the state, `reactAgent.step` also the reason.
 *
 * Time never goes back (the origin's rule), but no input is lost to a clock: an input whose
 * `timestamp` is not after the state's `updatedAt` takes effect at `updatedAt + 1` (see
 * {@link effectiveTimestamp}). That keeps `messages` ordered and "newer than `calledLlmAt`" exact,
 * and the seed's own example, five inputs stamped with one `Date.now()`, keeps all five.
 */
export function applyAgentInput(input: AgentInput, state: AgentState, options: AgentTransitionOptions = {}): AgentInputOutcome {
  const type: unknown = (input as { type?: unknown } | null | undefined)?.type;
  if (!AGENT_INPUT_TYPES.includes(type as AgentInput['type'])) {
    return { applied: false, code: 'unknown_event', reason: unknownEventReason('react-agent', type, AGENT_INPUT_TYPES) };
  }
  const { initialContextWindowSize, expandContextWindowSize } = { ...DEFAULTS, ...options };
  const stamped: AgentInput = { ...input, timestamp: effectiveTimestamp(input.timestamp, state) };
  switch (stamped.type) {
    case 'user-message-received':
      return userMessageReceived(stamped, state, initialContextWindowSize);
    case 'llm-message-started':
      return llmMessageStarted(stamped, state);
    case 'llm-message-completed':
      return llmMessageCompleted(stamped, state);
    case 're-act-observed':
      return reActObserved(stamped, state);
    case 'tool-call-completed':
      return toolCallCompleted(stamped, state);
    case 'context-window-expanded':
      return contextWindowExpanded(stamped, state, expandContextWindowSize);
    case 'history-tool-calls-added':
      return historyToolCallsAdded(stamped, state);
    case 'tool-call-claimed':
      return toolCallClaimed(stamped, state);
    case 'llm-round-answered':
      return llmRoundAnswered(stamped, state);
  }
}

/**
 * The time an input takes effect: its `timestamp`, or `updatedAt + 1` if that is not after the
 * state's `updatedAt` (equal stamps from one `Date.now()`, a client clock behind the server's).
 * The log's order is the agent's order, as for every stream; the rune keeps the timestamp sent.
 */
export const effectiveTimestamp = (timestamp: number, state: AgentState): number => (timestamp > state.updatedAt ? timestamp : state.updatedAt + 1);

/**
 * The agent's transition in the seed's curried form, as `createMoorex` takes it:
 * `agentTransition(input)(state)`. Pure and total: an input that does not apply (a duplicate message
 * id, the completion of an unknown message, a result for an unknown or finished tool call, a stale
 * observation) returns the same state object. A timestamp not after the state's is lifted, not refused.
 *
 * @example
 * ```ts
 * import { agentTransition, initialAgentState } from 'runestream';
 * const s0 = initialAgentState();
 * const s1 = agentTransition({ type: 'user-message-received', messageId: 'm1', content: 'Hi', timestamp: 1 })(s0);
 * console.log(s1.reActContext?.contextWindowSize);  // Logs: 10
 * // The window already covers the one message, so expanding it changes nothing:
 * console.log(agentTransition({ type: 'context-window-expanded', timestamp: 2 }, { expandContextWindowSize: 5 })(s1) === s1);
 * // Logs: true
 * ```
 */
export function agentTransition(input: AgentInput, options?: AgentTransitionOptions): (state: AgentState) => AgentState {
  return (state) => {
    try {
      const outcome = applyAgentInput(input, state, options);
      return outcome.applied ? outcome.state : state;
    } catch {
      // Total by contract: a hand-built input that skipped validation is not applied.
      return state;
    }
  };
}

function userMessageReceived({ messageId, content, timestamp }: Input<'user-message-received'>, state: AgentState, initialContextWindowSize: number): AgentInputOutcome {
  if (state.messages.some((m) => m.id === messageId)) return notAllowed(`message "${messageId}" already exists`);
  const context = state.reActContext;
  return applied({
    ...state,
    messages: [...state.messages, { id: messageId, role: 'user', content, timestamp }],
    // The new message joins the loop in progress (its window grows by one), or opens a new loop.
    reActContext:
      context === null
        ? { contextWindowSize: initialContextWindowSize, toolCallIds: [], startedAt: timestamp, updatedAt: timestamp }
        : { ...context, contextWindowSize: context.contextWindowSize + 1, updatedAt: timestamp },
    updatedAt: timestamp,
  });
}

function llmMessageStarted({ messageId, timestamp }: Input<'llm-message-started'>, state: AgentState): AgentInputOutcome {
  if (state.messages.some((m) => m.id === messageId)) return notAllowed(`message "${messageId}" already exists`);
  return applied({
    ...state,
    messages: [...state.messages, { id: messageId, role: 'assistant', content: '', timestamp, streaming: true }],
    updatedAt: timestamp,
  });
}

function llmMessageCompleted({ messageId, content, timestamp }: Input<'llm-message-completed'>, state: AgentState): AgentInputOutcome {
  const index = state.messages.findIndex((m) => m.id === messageId);
  const message = state.messages[index];
  if (message === undefined) return notAllowed(`no message "${messageId}" to complete`);
  if (message.role !== 'assistant') return notAllowed(`message "${messageId}" is a user message, not an assistant one`);
  if (!message.streaming) return notAllowed(`message "${messageId}" is already completed`);
  const messages = [...state.messages];
  // The message keeps the timestamp of its start, so `messages` stays in order.
  messages[index] = { ...message, content, streaming: false };
  return applied({ ...state, messages, updatedAt: timestamp });
}

function reActObserved({ calledLlmAt, observation, timestamp }: Input<'re-act-observed'>, state: AgentState): AgentInputOutcome {
  const context = state.reActContext;
  if (context === null) return notAllowed('no ReAct loop is in progress');
  if (!(calledLlmAt > state.calledLlmAt)) {
    return notAllowed(`stale observation: calledLlmAt ${calledLlmAt} is not after the state's calledLlmAt ${state.calledLlmAt}`);
  }
  if (observation.type === 'complete-re-act') {
    return applied({ ...state, reActContext: null, calledLlmAt, updatedAt: timestamp });
  }
  // An id already in the history keeps its record: a request never overwrites a call (or its result).
  const issued = Object.entries(observation.toolCalls)
    .filter(([id]) => !Object.hasOwn(state.toolCalls, id))
    .map(([id, request]): [string, ToolCallRecord] => [id, { ...request, result: null }]);
  return applied({
    ...state,
    toolCalls: { ...state.toolCalls, ...Object.fromEntries(issued) },
    reActContext: withToolCalls(context, Object.keys(observation.toolCalls), timestamp),
    calledLlmAt,
    updatedAt: timestamp,
  });
}

function toolCallCompleted({ toolCallId, result, timestamp }: Input<'tool-call-completed'>, state: AgentState): AgentInputOutcome {
  const call = Object.hasOwn(state.toolCalls, toolCallId) ? state.toolCalls[toolCallId] : undefined;
  if (call === undefined) return notAllowed(`no tool call "${toolCallId}"`);
  if (call.result !== null) return notAllowed(`tool call "${toolCallId}" already has a result`);
  return applied({
    ...state,
    // As in the origin, the result is stamped with the input's timestamp: it then orders with every
    // other input, and "a result newer than calledLlmAt" is exact.
    toolCalls: { ...state.toolCalls, [toolCallId]: { ...call, result: { ...result, receivedAt: timestamp } } },
    updatedAt: timestamp,
  });
}

function contextWindowExpanded({ timestamp }: Input<'context-window-expanded'>, state: AgentState, expandContextWindowSize: number): AgentInputOutcome {
  const context = state.reActContext;
  if (context === null) return notAllowed('no ReAct loop is in progress');
  const total = state.messages.length;
  // The origin caps the window at the message count, which could shrink a new loop's window: never shrink.
  if (context.contextWindowSize >= total) {
    return notAllowed(`the context window (${context.contextWindowSize}) already covers all ${total} messages`);
  }
  return applied({
    ...state,
    reActContext: {
      ...context,
      contextWindowSize: Math.min(context.contextWindowSize + expandContextWindowSize, total),
      updatedAt: timestamp,
    },
    updatedAt: timestamp,
  });
}

function historyToolCallsAdded({ toolCallIds, timestamp }: Input<'history-tool-calls-added'>, state: AgentState): AgentInputOutcome {
  const context = state.reActContext;
  if (context === null) return notAllowed('no ReAct loop is in progress');
  const unknown = toolCallIds.filter((id) => !Object.hasOwn(state.toolCalls, id));
  if (unknown.length > 0) return notAllowed(`no tool call ${unknown.map((id) => `"${id}"`).join(', ')} in the history`);
  if (toolCallIds.every((id) => context.toolCallIds.includes(id))) {
    return notAllowed('every tool call given is already in the ReAct context');
  }
  return applied({ ...state, reActContext: withToolCalls(context, toolCallIds, timestamp), updatedAt: timestamp });
}

/**
 * The claim of a call in flight, before its tool starts: an unclaimed call takes any claim that
 * supersedes nothing; a claimed one only a claim that supersedes its current one (a re-run after a
 * takeover). So of two runners' claims, one is taken.
 */
function toolCallClaimed({ toolCallId, claim, supersedes, timestamp }: Input<'tool-call-claimed'>, state: AgentState): AgentInputOutcome {
  const call = Object.hasOwn(state.toolCalls, toolCallId) ? state.toolCalls[toolCallId] : undefined;
  if (call === undefined) return notAllowed(`no tool call "${toolCallId}"`);
  if (call.result !== null) return notAllowed(`tool call "${toolCallId}" already has a result`);
  if (call.claim === undefined && supersedes !== undefined) return notAllowed(`tool call "${toolCallId}" has no claim, so none "${supersedes}" to supersede`);
  if (call.claim !== undefined && supersedes !== call.claim) return notAllowed(`tool call "${toolCallId}" is claimed by "${call.claim}"`);
  return applied({
    ...state,
    toolCalls: { ...state.toolCalls, [toolCallId]: { ...call, claim, attempt: (call.attempt ?? 0) + 1 } },
    updatedAt: timestamp,
  });
}

/**
 * A round of the model call in progress answered: the state keeps nothing of it (its usage is the
 * rune's, summed by the call's turn), but only the current call has rounds, so one of a call the
 * loop has already observed, or of no loop, is refused.
 */
function llmRoundAnswered({ calledLlmAt, timestamp }: Input<'llm-round-answered'>, state: AgentState): AgentInputOutcome {
  if (state.reActContext === null) return notAllowed('no ReAct loop is in progress');
  if (!(calledLlmAt > state.calledLlmAt)) {
    return notAllowed(`stale round: calledLlmAt ${calledLlmAt} is not after the state's calledLlmAt ${state.calledLlmAt}`);
  }
  return applied({ ...state, updatedAt: timestamp });
}

/** The context with `ids` added after its own, each once. */
const withToolCalls = (context: ReActContext, ids: readonly string[], timestamp: number): ReActContext => ({
  ...context,
  toolCallIds: [...new Set([...context.toolCallIds, ...ids])],
  updatedAt: timestamp,
});
