import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { ToolCallEvent, ToolCallInput, ToolCallPayloads, ToolCallState, ToolCallStateName, type ToolCallStatus } from './schema.js';

type S = ToolCallState;
type E = ToolCallEvent;
type P = typeof ToolCallPayloads;

/** The `tool.result` payload of a timeout (of the approval or of the execution). */
const timedOut = (s: S) => ({ callId: s.callId, status: 'timeout' as const });
/** The `tool.result` payload of a cancelled call. */
const cancelled = (s: S, e: { reason?: string | undefined }) => ({ callId: s.callId, status: 'cancelled' as const, reason: e.reason });

/** Seed 003 Tool Lifecycle diagram, edge for edge, with the rune kinds of its "Tool Events" table. */
const table: readonly Row<S, E, P>[] = [
  {
    from: 'pending_call',
    on: 'requires_approval',
    to: 'awaiting_approval',
    kind: 'tool.approval_requested',
    assign: (_, e) => ({ policyReason: e.policyReason }),
    payload: (s, e) => ({ callId: s.callId, policyReason: e.policyReason }),
  },
  { from: 'pending_call', on: 'auto_approved', to: 'executing', kind: 'tool.approved', payload: (s) => ({ callId: s.callId }) },
  { from: 'pending_call', on: 'no_approval_needed', to: 'executing' },
  {
    from: 'awaiting_approval',
    on: 'approved',
    to: 'executing',
    kind: 'tool.approved',
    assign: (_, e) => ({ approver: e.approver }),
    payload: (s, e) => ({ callId: s.callId, approver: e.approver }),
  },
  {
    from: 'awaiting_approval',
    on: 'denied',
    to: 'denied',
    kind: 'tool.denied',
    assign: (_, e) => ({ reason: e.reason }),
    payload: (s, e) => ({ callId: s.callId, reason: e.reason }),
  },
  { from: 'awaiting_approval', on: 'approval_timeout', to: 'timeout_result', kind: 'tool.result', payload: timedOut },
  {
    from: 'executing',
    on: 'execution_claimed',
    when: (s, e) => (s.claim === undefined ? e.supersedes === undefined : e.supersedes === s.claim),
    label: 'an unclaimed call, or supersedes naming its current claim',
    kind: 'tool.claimed',
    assign: (s, e) => ({ claim: e.claim, attempt: (s.attempt ?? 0) + 1 }),
    payload: (s, e, next) => ({ callId: s.callId, claim: e.claim, attempt: next.attempt ?? 1, supersedes: e.supersedes }),
    source: 'extension',
    note: 'the runner claims the call before its tool starts, so a process taking it over knows whether it started, and two runners cannot both start it',
  },
  {
    from: 'executing',
    on: 'progress_update',
    kind: 'tool.progress',
    assign: (s) => ({ progressCount: s.progressCount + 1 }),
    payload: (s, e) => ({ callId: s.callId, chunk: e.chunk }),
  },
  {
    from: 'executing',
    on: 'success',
    to: 'completed_result',
    kind: 'tool.result',
    assign: (_, e) => ({ output: e.output }),
    payload: (s, e) => ({ callId: s.callId, status: 'success', output: e.output }),
  },
  {
    from: 'executing',
    on: 'execution_error',
    to: 'error_result',
    kind: 'tool.result',
    assign: (_, e) => ({ error: e.error }),
    payload: (s, e) => ({ callId: s.callId, status: 'error', error: e.error }),
  },
  { from: 'executing', on: 'execution_timeout', to: 'timeout_result', kind: 'tool.result', payload: timedOut },
  { from: 'executing', on: 'cancelled', to: 'cancelled_result', kind: 'tool.result', assign: (_, e) => ({ reason: e.reason }), payload: cancelled },
  {
    from: ['pending_call', 'awaiting_approval'],
    on: 'cancelled',
    to: 'cancelled_result',
    kind: 'tool.result',
    assign: (_, e) => ({ reason: e.reason }),
    payload: cancelled,
    source: 'extension',
    note: 'a stopped turn must end every pending call with a result, or the next model call sees an orphan tool call',
  },
];

/**
 * One tool invocation of seed 003, from its `tool.call` to exactly one outcome: `denied` or a
 * `tool.result` state (`completed_result`, `error_result`, `timeout_result`, `cancelled_result`).
 * Each rune kind's payload (`tool.result`'s `status` among them) is in `ToolCallPayloads`.
 *
 * @example
 * ```ts
 * import { toolCall, toolCallStatus } from 'runestream';
 * let s = toolCall.initial({ callId: 'c1', toolName: 'shell', arguments: { cmd: 'ls' } }); // pending_call
 * console.log(toolCall.step(s, { type: 'requires_approval' }));
 * // Logs: { accepted: true, state: { value: 'awaiting_approval', ... }, kind: 'tool.approval_requested', payload: { callId: 'c1', policyReason: undefined } }
 * s = toolCall.transition(s, { type: 'no_approval_needed' });       // executing
 * s = toolCall.transition(s, { type: 'success', output: 'a.txt' }); // completed_result
 * console.log(toolCallStatus(s));                                    // Logs: success
 * ```
 */
export const toolCall = defineMachine<S, E, ToolCallInput, P>({
  id: 'tool-call',
  states: ToolCallStateName.options,
  terminal: ['denied', 'completed_result', 'error_result', 'timeout_result', 'cancelled_result'],
  events: eventTypesOf(ToolCallEvent),
  schemas: { state: ToolCallState, event: ToolCallEvent, input: ToolCallInput },
  initial: ({ callId, toolName, arguments: args }) => ({ value: 'pending_call', callId, toolName, arguments: args, progressCount: 0 }),
  table,
  spawnKind: 'tool.call',
  payloads: ToolCallPayloads,
  spawnPayload: ({ callId, toolName, arguments: args }) => ({ callId, toolName, arguments: args }),
});

const statusByState: Partial<Record<S['value'], ToolCallStatus>> = {
  completed_result: 'success',
  error_result: 'error',
  timeout_result: 'timeout',
  cancelled_result: 'cancelled',
  denied: 'denied',
};

/**
 * How a call ended (the `status` its `tool.result` carries, or `denied`), or `undefined` while
 * it is still pending, awaiting approval or executing.
 *
 * @example
 * ```ts
 * import { toolCallStatus } from 'runestream';
 * console.log(toolCallStatus({ value: 'timeout_result' })); // Logs: timeout
 * console.log(toolCallStatus({ value: 'executing' }));      // Logs: undefined
 * ```
 */
export const toolCallStatus = (state: Pick<S, 'value'>): ToolCallStatus | undefined => statusByState[state.value];
