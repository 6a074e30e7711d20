import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { CircuitBreakerEvent, CircuitBreakerInput, CircuitBreakerState, CircuitBreakerStateName } from './schema.js';

type S = CircuitBreakerState;
type E = CircuitBreakerEvent;

/** A failure: one more consecutive failure, and its error if it reported one. */
const countFailure = (s: S, e: Extract<E, { type: 'failure' }>): Partial<S> => ({
  failureCount: s.failureCount + 1,
  successCount: 0,
  lastError: e.error ?? s.lastError,
});
const resetCounts = (): Partial<S> => ({ failureCount: 0, successCount: 0 });
/** Entering OPEN: for the failure's `retryAfterMs` if it has one, else for `openTimeoutMs`. */
const openFor = (e: Extract<E, { type: 'failure' }>): Partial<S> => ({ openForMs: e.retryAfterMs });
/** Whether a failure says when to call again (a 429 or 503 with `Retry-After`). */
const saysRetryAfter = (_: S, e: Extract<E, { type: 'failure' }>): boolean => e.retryAfterMs !== undefined;

/** Seed 002 section 1, edge for edge, with the counting rules DESIGN.md fixes. */
const table: readonly Row<S, E>[] = [
  { from: 'CLOSED', on: 'success', assign: () => ({ failureCount: 0 }) },
  {
    from: 'CLOSED',
    on: 'failure',
    to: 'OPEN',
    when: saysRetryAfter,
    label: 'retryAfterMs',
    assign: (s, e) => ({ ...countFailure(s, e), ...openFor(e) }),
    source: 'extension',
    note: 'the provider said when to call again (HTTP 429/503 Retry-After): calls before then are refused anyway, so it opens at once, for that long',
  },
  // The guards count the failure being applied: the breaker opens on the failureThreshold-th.
  {
    from: 'CLOSED',
    on: 'failure',
    when: (s) => s.failureCount + 1 < s.failureThreshold,
    label: 'failureCount < threshold',
    assign: countFailure,
  },
  {
    from: 'CLOSED',
    on: 'failure',
    to: 'OPEN',
    when: (s) => s.failureCount + 1 >= s.failureThreshold,
    label: 'failureCount >= threshold',
    assign: (s, e) => ({ ...countFailure(s, e), ...openFor(e) }),
  },
  {
    from: 'OPEN',
    on: 'open_timeout_elapsed',
    to: 'HALF_OPEN',
    when: (s) => s.keptOpen !== true,
    label: 'not kept open',
    assign: () => ({ successCount: 0, openForMs: undefined }),
  },
  {
    from: 'OPEN',
    on: 'open_timeout_elapsed',
    when: (s) => s.keptOpen === true,
    label: 'kept open',
    source: 'extension',
    note: "an operator's manual_keep_open holds the breaker OPEN until manual_reset: a timeout that fires anyway (armed before it) changes nothing",
  },
  {
    from: 'HALF_OPEN',
    on: 'success',
    when: (s) => s.successCount + 1 < s.successThreshold,
    label: 'successCount < successThreshold',
    assign: (s) => ({ failureCount: 0, successCount: s.successCount + 1 }),
    source: 'design',
    note: 'HALF_OPEN closes only after successThreshold successes; the ones before it stay',
  },
  {
    from: 'HALF_OPEN',
    on: 'success',
    to: 'CLOSED',
    when: (s) => s.successCount + 1 >= s.successThreshold,
    label: 'successCount >= successThreshold',
    assign: resetCounts,
  },
  { from: 'HALF_OPEN', on: 'failure', to: 'OPEN', assign: (s, e) => ({ ...countFailure(s, e), ...openFor(e) }) },
  // "OPEN --> OPEN: manualKeepOpen/metrics": the operator's keep-open, and the outcome of a call
  // forced through while every provider is OPEN, recorded without closing the breaker.
  {
    from: 'OPEN',
    on: 'manual_keep_open',
    assign: () => ({ keptOpen: true as const }),
    note: 'held OPEN until manual_reset: the open timeout no longer half-opens it',
  },
  { from: 'OPEN', on: 'failure', assign: countFailure, note: 'a forced attempt records its failure' },
  {
    from: 'OPEN',
    on: 'success',
    assign: () => ({ failureCount: 0 }),
    note: 'a forced attempt records its success; only the HALF_OPEN trial closes the breaker',
  },
  { from: 'CLOSED', on: 'manual_reset', assign: resetCounts },
  {
    from: ['OPEN', 'HALF_OPEN'],
    on: 'manual_reset',
    to: 'CLOSED',
    assign: () => ({ ...resetCounts(), openForMs: undefined, keptOpen: undefined }),
    source: 'extension',
    note: "an operator's reset must be able to close an open breaker, not only clear a closed one's count",
  },
  {
    from: ['CLOSED', 'OPEN', 'HALF_OPEN'],
    on: 'settings_changed',
    // Whole: a setting the new ones leave out (halfOpenMaxCalls) is back to its default.
    assign: (_, e) => ({ halfOpenMaxCalls: undefined, ...e.settings }),
    source: 'extension',
    note: 'the configured settings were edited: the breaker takes them, keeping its state and counts, and the change is in the log',
  },
];

/**
 * A circuit breaker per provider (seed 002): CLOSED counts consecutive failures and opens at
 * `failureThreshold`; OPEN waits for `open_timeout_elapsed`; HALF_OPEN closes after
 * `successThreshold` successes and reopens on any failure. An operator's `manual_keep_open` holds
 * an OPEN breaker open until `manual_reset`; `settings_changed` records edited settings.
 *
 * @example
 * ```ts
 * import { circuitBreaker } from 'runestream';
 * let s = circuitBreaker.initial({ failureThreshold: 2, successThreshold: 1, openTimeoutMs: 30_000 });
 * s = circuitBreaker.transition(s, { type: 'failure', error: 'timeout' });  // CLOSED, failureCount 1
 * s = circuitBreaker.transition(s, { type: 'failure', error: 'timeout' });
 * console.log(s.value);                                                     // Logs: OPEN
 * s = circuitBreaker.transition(s, { type: 'open_timeout_elapsed' });       // HALF_OPEN
 * console.log(circuitBreaker.transition(s, { type: 'success' }).value);     // Logs: CLOSED
 * ```
 */
export const circuitBreaker = defineMachine<S, E, CircuitBreakerInput>({
  id: 'circuit-breaker',
  states: CircuitBreakerStateName.options,
  terminal: [],
  events: eventTypesOf(CircuitBreakerEvent),
  schemas: { state: CircuitBreakerState, event: CircuitBreakerEvent, input: CircuitBreakerInput },
  initial: (input) => ({ value: 'CLOSED', ...input, failureCount: 0, successCount: 0 }),
  table,
});

/**
 * Whether the breaker lets a call through: CLOSED always, OPEN never, HALF_OPEN while fewer than
 * `halfOpenMaxCalls` (default 1) trial calls are under way. The fallback chain still forces a call
 * when no provider's breaker lets one through.
 *
 * @example
 * ```ts
 * import { circuitBreaker, circuitBreakerAllowsCall } from 'runestream';
 * const s = circuitBreaker.initial({ failureThreshold: 3, successThreshold: 1, openTimeoutMs: 1000 });
 * console.log(circuitBreakerAllowsCall(s)); // Logs: true
 * const halfOpen = { ...s, value: 'HALF_OPEN' as const };
 * console.log(circuitBreakerAllowsCall(halfOpen, 0), circuitBreakerAllowsCall(halfOpen, 1)); // Logs: true false
 * ```
 */
export const circuitBreakerAllowsCall = (state: CircuitBreakerState, trialsUnderWay = 0): boolean =>
  state.value === 'CLOSED' || (state.value === 'HALF_OPEN' && trialsUnderWay < (state.halfOpenMaxCalls ?? 1));
