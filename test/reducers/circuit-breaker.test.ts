import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  circuitBreaker,
  circuitBreakerAllowsCall,
  edgesOf,
  stepUnknown,
  type CircuitBreakerEvent,
  type CircuitBreakerInput,
  type CircuitBreakerState,
} from '../../src/index.js';
import { checkMachineProperties, type ContextRow, expectRowAfter, expectTerminalsAbsorb, stateAt } from '../support/machine-properties.js';
import { drawnEdges, eventsByLabel, missingDrawnEdges, readSeed } from '../support/seed-diagram.js';

const config: CircuitBreakerInput = { failureThreshold: 3, successThreshold: 2, openTimeoutMs: 30_000 };
const at = (value: CircuitBreakerState['value'], context: Partial<CircuitBreakerState> = {}) => stateAt(circuitBreaker, value, context, config);

const samples: CircuitBreakerEvent[] = [
  { type: 'success' },
  { type: 'failure', error: 'timeout' },
  { type: 'open_timeout_elapsed' },
  { type: 'manual_reset' },
  { type: 'manual_keep_open' },
  { type: 'settings_changed', settings: { failureThreshold: 2, successThreshold: 1, openTimeoutMs: 1000 } },
];

describe('circuitBreaker: seed 002 diagram 1, edge by edge', () => {
  const rows: ContextRow<CircuitBreakerState, CircuitBreakerEvent>[] = [
    { from: 'CLOSED', context: { failureCount: 2 }, event: { type: 'success' }, to: 'CLOSED', after: { failureCount: 0 } },
    { from: 'CLOSED', context: { failureCount: 1 }, event: { type: 'failure' }, to: 'CLOSED', after: { failureCount: 2 } },
    { from: 'CLOSED', context: { failureCount: 2 }, event: { type: 'failure', error: '503' }, to: 'OPEN', after: { failureCount: 3, lastError: '503' } },
    { from: 'OPEN', context: { failureCount: 3 }, event: { type: 'open_timeout_elapsed' }, to: 'HALF_OPEN', after: { successCount: 0 } },
    { from: 'HALF_OPEN', context: { successCount: 1 }, event: { type: 'success' }, to: 'CLOSED', after: { failureCount: 0, successCount: 0 } },
    { from: 'HALF_OPEN', context: { successCount: 1 }, event: { type: 'failure' }, to: 'OPEN', after: { failureCount: 1, successCount: 0 } },
    { from: 'OPEN', context: { failureCount: 3 }, event: { type: 'manual_keep_open' }, to: 'OPEN', after: { failureCount: 3 } },
    // "manualKeepOpen/metrics": a call forced through an OPEN breaker records its outcome.
    { from: 'OPEN', context: { failureCount: 3 }, event: { type: 'failure', error: 'again' }, to: 'OPEN', after: { failureCount: 4, lastError: 'again' } },
    { from: 'OPEN', context: { failureCount: 3 }, event: { type: 'success' }, to: 'OPEN', after: { failureCount: 0 } },
    { from: 'CLOSED', context: { failureCount: 2 }, event: { type: 'manual_reset' }, to: 'CLOSED', after: { failureCount: 0 } },
  ];
  it.each(rows)('$from + $event.type -> $to', ({ from, context, event, to, after }) => {
    expectRowAfter(circuitBreaker, at(from, context), event, to, after);
  });

  it('every transition drawn in the seed is in the table', () => {
    const drawn = drawnEdges(readSeed('002_2417c8b666a13ea4.txt'), '## 1) CircuitBreaker');
    expect(drawn).toHaveLength(8);
    const labelToEvents: Record<string, string[]> = {
      success: ['success'],
      'failure (failureCount < threshold)': ['failure'],
      'failureCount >= threshold': ['failure'],
      'openTimeout elapsed': ['open_timeout_elapsed'],
      'successCount >= successThreshold': ['success'],
      failure: ['failure'],
      'manualKeepOpen/metrics': ['manual_keep_open', 'failure', 'success'],
      'manualReset (resetFailureCount)': ['manual_reset'],
    };
    expect(missingDrawnEdges(edgesOf(circuitBreaker), drawn, eventsByLabel(labelToEvents))).toEqual([]);
  });
});

describe('circuitBreaker: DESIGN.md counting and the extension', () => {
  it('opens on the failureThreshold-th consecutive failure, and a success in between starts the count again', () => {
    const run = (events: CircuitBreakerEvent[]) => events.reduce(circuitBreaker.transition, circuitBreaker.initial(config));
    const failure: CircuitBreakerEvent = { type: 'failure' };
    expect(run([failure, failure]).value).toBe('CLOSED');
    expect(run([failure, failure, failure]).value).toBe('OPEN');
    expect(run([failure, failure, { type: 'success' }, failure, failure]).value).toBe('CLOSED');
  });

  it('a failureThreshold of 1 opens on the first failure', () => {
    const state = circuitBreaker.initial({ ...config, failureThreshold: 1 });
    expect(circuitBreaker.transition(state, { type: 'failure' }).value).toBe('OPEN');
  });

  it('HALF_OPEN stays until successThreshold successes, then closes', () => {
    const first = circuitBreaker.transition(at('HALF_OPEN'), { type: 'success' });
    expect(first).toMatchObject({ value: 'HALF_OPEN', successCount: 1 });
    expect(circuitBreaker.transition(first, { type: 'success' })).toMatchObject({ value: 'CLOSED', successCount: 0, failureCount: 0 });
  });

  it('a success in OPEN is accepted as a new object but does not close it', () => {
    const open = at('OPEN', { failureCount: 3 });
    const next = circuitBreaker.transition(open, { type: 'success' });
    expect(next).not.toBe(open);
    expect(next.value).toBe('OPEN');
  });

  it.each(['OPEN', 'HALF_OPEN'] as const)('manual_reset closes the breaker from %s (extension)', (from) => {
    const next = circuitBreaker.transition(at(from, { failureCount: 4, successCount: 1 }), { type: 'manual_reset' });
    expect(next).toMatchObject({ value: 'CLOSED', failureCount: 0, successCount: 0 });
  });

  it('keeps its configuration in the state', () => {
    expect(circuitBreaker.initial(config)).toEqual({ value: 'CLOSED', ...config, failureCount: 0, successCount: 0 });
  });

  it('circuitBreakerAllowsCall is false when OPEN, and in HALF_OPEN once halfOpenMaxCalls (default 1) trials are under way', () => {
    expect(circuitBreakerAllowsCall(at('CLOSED'), 5)).toBe(true);
    expect(circuitBreakerAllowsCall(at('HALF_OPEN'))).toBe(true);
    expect(circuitBreakerAllowsCall(at('HALF_OPEN'), 1)).toBe(false);
    expect(circuitBreakerAllowsCall(at('HALF_OPEN', { halfOpenMaxCalls: 3 }), 2)).toBe(true);
    expect(circuitBreakerAllowsCall(at('HALF_OPEN', { halfOpenMaxCalls: 3 }), 3)).toBe(false);
    expect(circuitBreakerAllowsCall(at('OPEN'))).toBe(false);
  });

  it('a failure with retryAfterMs (a 429 or 503 with Retry-After) opens at once, for that long; half-opening forgets it', () => {
    const opened = circuitBreaker.transition(at('CLOSED'), { type: 'failure', error: 'HTTP 429', retryAfterMs: 7000 });
    expect(opened).toMatchObject({ value: 'OPEN', failureCount: 1, openForMs: 7000, lastError: 'HTTP 429' });
    const halfOpen = circuitBreaker.transition(opened, { type: 'open_timeout_elapsed' });
    expect(halfOpen).toMatchObject({ value: 'HALF_OPEN', openForMs: undefined });
    expect(circuitBreaker.transition(halfOpen, { type: 'failure', retryAfterMs: 2000 })).toMatchObject({ value: 'OPEN', openForMs: 2000 });
    // Without a Retry-After, the next OPEN period is openTimeoutMs again.
    expect(circuitBreaker.transition(halfOpen, { type: 'failure' })).toMatchObject({ value: 'OPEN', openForMs: undefined });
  });

  it('has no terminal state, so no state absorbs events', () => {
    expect(circuitBreaker.terminal).toEqual([]);
    expectTerminalsAbsorb(circuitBreaker, samples, config);
  });

  it('rejects an event that does not apply with the same object and a reason', () => {
    const closed = at('CLOSED');
    expect(circuitBreaker.step(closed, { type: 'open_timeout_elapsed' })).toEqual({
      accepted: false,
      state: closed,
      code: 'not_allowed',
      reason: 'event "open_timeout_elapsed" is not allowed in state "CLOSED"',
    });
    const halfOpen = at('HALF_OPEN');
    expect(circuitBreaker.transition(halfOpen, { type: 'manual_keep_open' })).toBe(halfOpen);
    expect(circuitBreaker.step(halfOpen, { type: 'manual_keep_open' })).toMatchObject({
      code: 'not_allowed',
      reason: 'event "manual_keep_open" is not allowed in state "HALF_OPEN"',
    });
  });
});

describe('circuitBreaker: bad input', () => {
  it('names the field of an event that fails its schema', () => {
    const step = stepUnknown(circuitBreaker, at('CLOSED'), { type: 'failure', error: 500 });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(`"invalid "failure" event: error: Invalid input: expected string, received number"`);
  });

  it('rejects an unknown event type by name', () => {
    const step = stepUnknown(circuitBreaker, at('CLOSED'), { type: 'trip' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"unknown event type "trip" for machine "circuit-breaker"; expected one of: success, failure, open_timeout_elapsed, manual_reset, manual_keep_open, settings_changed"`,
    );
  });

  it('rejects a spawn input that is not a positive threshold', () => {
    const parsed = circuitBreaker.schemas.input.safeParse({ failureThreshold: 0, successThreshold: 1, openTimeoutMs: -1 });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((i) => i.path.join('.'))).toEqual(['failureThreshold', 'openTimeoutMs']);
  });
});

describe('circuitBreaker: properties', () => {
  const input: fc.Arbitrary<CircuitBreakerInput> = fc.record({
    failureThreshold: fc.integer({ min: 1, max: 5 }),
    successThreshold: fc.integer({ min: 1, max: 4 }),
    openTimeoutMs: fc.nat({ max: 120_000 }),
  });
  // Failures weigh most so that random runs open the breaker often.
  const event: fc.Arbitrary<CircuitBreakerEvent> = fc.oneof(
    { arbitrary: fc.constant({ type: 'success' as const }), weight: 3 },
    {
      arbitrary: fc.option(fc.string(), { nil: undefined }).map((error) => (error === undefined ? { type: 'failure' as const } : { type: 'failure' as const, error })),
      weight: 5,
    },
    { arbitrary: fc.constant({ type: 'open_timeout_elapsed' as const }), weight: 2 },
    { arbitrary: fc.constant({ type: 'manual_reset' as const }), weight: 1 },
    { arbitrary: fc.constant({ type: 'manual_keep_open' as const }), weight: 1 },
  );

  it('random event sequences keep every machine property, and CLOSED stays below the threshold', () => {
    checkMachineProperties(circuitBreaker, {
      event,
      input,
      onAccepted: (_, __, next) => {
        if (next.value === 'CLOSED') expect(next.failureCount).toBeLessThan(next.failureThreshold);
        if (next.value !== 'HALF_OPEN') expect(next.successCount).toBe(0);
      },
    });
  });

  it('OPEN is entered only from CLOSED after exactly failureThreshold consecutive failures, or from HALF_OPEN by a failure', () => {
    fc.assert(
      fc.property(input, fc.array(event, { maxLength: 80, size: 'max' }), (config, events) => {
        let state = circuitBreaker.initial(config);
        // Failures seen in CLOSED since the last success, manual_reset or close: kept by the test, not read from the state.
        let closedFailures = 0;
        for (const e of events) {
          const next = circuitBreaker.transition(state, e);
          if (state.value === 'CLOSED' && e.type === 'failure') {
            expect(next, 'a failure is always recorded in CLOSED').not.toBe(state);
            closedFailures += 1;
            expect(next.value === 'OPEN').toBe(closedFailures === config.failureThreshold);
          }
          if (next !== state && (e.type === 'success' || e.type === 'manual_reset' || (next.value === 'CLOSED' && state.value !== 'CLOSED'))) {
            closedFailures = 0;
          }
          if (next.value === 'OPEN' && state.value !== 'OPEN') {
            expect(e.type).toBe('failure');
            expect(['CLOSED', 'HALF_OPEN']).toContain(state.value);
          }
          state = next;
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('circuitBreaker: an operator keeps it OPEN, and a change of settings is a rune (issue 28 g)', () => {
  it('manual_keep_open holds the breaker OPEN: open_timeout_elapsed leaves it OPEN, until manual_reset closes it', () => {
    const kept = circuitBreaker.transition(at('OPEN', { failureCount: 3 }), { type: 'manual_keep_open' });
    expect(kept).toMatchObject({ value: 'OPEN', keptOpen: true });
    expect(circuitBreaker.transition(kept, { type: 'open_timeout_elapsed' })).toMatchObject({ value: 'OPEN', keptOpen: true });
    const reset = circuitBreaker.transition(kept, { type: 'manual_reset' });
    expect(reset).toMatchObject({ value: 'CLOSED', failureCount: 0 });
    expect(reset.keptOpen).toBeUndefined();
  });

  it.each(['CLOSED', 'OPEN', 'HALF_OPEN'] as const)('settings_changed in %s takes the new settings, keeping the state and its counts', (from) => {
    const settings = { failureThreshold: 1, successThreshold: 1, openTimeoutMs: 5000, halfOpenMaxCalls: 2 };
    const next = circuitBreaker.transition(at(from, { failureCount: 2, halfOpenMaxCalls: 4 }), { type: 'settings_changed', settings });
    expect(next).toMatchObject({ value: from, failureCount: 2, ...settings });
    // A setting left out goes back to its default (halfOpenMaxCalls: absent, meaning 1).
    const without = circuitBreaker.transition(at(from, { halfOpenMaxCalls: 4 }), {
      type: 'settings_changed',
      settings: { failureThreshold: 2, successThreshold: 1, openTimeoutMs: 1 },
    });
    expect(without.halfOpenMaxCalls).toBeUndefined();
  });

  it('refuses settings_changed with settings out of range, naming the field', () => {
    const state = at('CLOSED');
    const step = stepUnknown(circuitBreaker, state, { type: 'settings_changed', settings: { failureThreshold: 0, successThreshold: 1, openTimeoutMs: 1 } });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event' });
    expect(!step.accepted && step.reason).toContain('settings.failureThreshold');
  });
});
