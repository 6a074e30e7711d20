import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { edgesOf, metricsCollector, stepUnknown, type MetricsCollectorEvent, type MetricsCollectorState } from '../../src/index.js';
import { checkMachineProperties, expectRow, expectTerminalsAbsorb, stateAt } from '../support/machine-properties.js';
import { drawnEdges, eventsByLabel, missingDrawnEdges, readSeed } from '../support/seed-diagram.js';

const at = (value: MetricsCollectorState['value'], context: Partial<MetricsCollectorState> = {}) => stateAt(metricsCollector, value, context);

const samples: MetricsCollectorEvent[] = [
  { type: 'initialized' },
  { type: 'binding_missing', error: 'METRICS_KV not bound' },
  { type: 'runtime_error', error: 'KV put failed' },
  { type: 'retry' },
  { type: 'recovered' },
  { type: 'archive_triggered' },
  { type: 'archive_done' },
];

describe('metricsCollector: seed 002 diagram 5, edge by edge', () => {
  const rows: Array<[MetricsCollectorState['value'], MetricsCollectorEvent, MetricsCollectorState['value']]> = [
    ['INITIALIZING', { type: 'initialized' }, 'RUNNING'],
    ['INITIALIZING', { type: 'binding_missing', error: 'METRICS_KV not bound' }, 'ERROR'],
    ['RUNNING', { type: 'runtime_error', error: 'KV put failed' }, 'ERROR'],
    ['ERROR', { type: 'retry' }, 'RECOVERING'],
    ['RECOVERING', { type: 'recovered' }, 'RUNNING'],
    ['RUNNING', { type: 'archive_triggered' }, 'ARCHIVING'],
  ];
  it.each(rows)('%s + %o -> %s', (from, event, to) => {
    expectRow(metricsCollector, at(from), event, to);
  });

  it('every transition drawn in the seed is in the table', () => {
    const drawn = drawnEdges(readSeed('002_2417c8b666a13ea4.txt'), '## 5) MetricsCollector');
    expect(drawn).toHaveLength(6);
    const labelToEvents: Record<string, string[]> = {
      'initialized successfully': ['initialized'],
      'KV or binding missing': ['binding_missing'],
      'runtime error writing to KV': ['runtime_error'],
      'manual or automatic retry': ['retry'],
      recovered: ['recovered'],
      'on schedule -> trigger ArchivalService': ['archive_triggered'],
    };
    expect(missingDrawnEdges(edgesOf(metricsCollector), drawn, eventsByLabel(labelToEvents))).toEqual([]);
  });
});

describe('metricsCollector: DESIGN.md resolution, extension and context', () => {
  it('archive_done returns ARCHIVING to RUNNING', () => {
    expect(metricsCollector.transition(at('ARCHIVING'), { type: 'archive_done' })).toEqual({ value: 'RUNNING' });
  });

  it('a recovery that fails goes back to ERROR instead of hanging in RECOVERING (extension)', () => {
    expect(metricsCollector.transition(at('RECOVERING', { error: 'KV put failed' }), { type: 'runtime_error', error: 'KV still down' })).toEqual({
      value: 'ERROR',
      error: 'KV still down',
    });
  });

  it('keeps the error through the recovery and clears it once recovered', () => {
    const events: MetricsCollectorEvent[] = [{ type: 'binding_missing', error: 'METRICS_KV not bound' }, { type: 'retry' }];
    const recovering = events.reduce(metricsCollector.transition, metricsCollector.initial());
    expect(recovering).toEqual({ value: 'RECOVERING', error: 'METRICS_KV not bound' });
    // A failure that says nothing keeps the error already known.
    expect(metricsCollector.transition(recovering, { type: 'runtime_error' })).toEqual({ value: 'ERROR', error: 'METRICS_KV not bound' });
    expect(metricsCollector.transition(recovering, { type: 'recovered' })).toEqual({ value: 'RUNNING' });
  });

  it('has no terminal state', () => {
    expect(metricsCollector.terminal).toEqual([]);
    expectTerminalsAbsorb(metricsCollector, samples);
  });

  it('rejects an event that does not apply with the same object and a reason', () => {
    const archiving = at('ARCHIVING');
    expect(metricsCollector.step(archiving, { type: 'archive_triggered' })).toEqual({
      accepted: false,
      state: archiving,
      code: 'not_allowed',
      reason: 'event "archive_triggered" is not allowed in state "ARCHIVING"',
    });
    const running = at('RUNNING');
    expect(metricsCollector.transition(running, { type: 'archive_done' })).toBe(running);
  });
});

describe('metricsCollector: bad input', () => {
  it('names the field of an event that fails its schema', () => {
    const step = stepUnknown(metricsCollector, at('RUNNING'), { type: 'runtime_error', error: { code: 500 } });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(`"invalid "runtime_error" event: error: Invalid input: expected string, received object"`);
  });

  it('rejects an unknown event type by name', () => {
    const step = stepUnknown(metricsCollector, at('RUNNING'), { type: 'flush' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"unknown event type "flush" for machine "metrics-collector"; expected one of: initialized, binding_missing, runtime_error, retry, recovered, archive_triggered, archive_done"`,
    );
  });
});

describe('metricsCollector: properties', () => {
  const error = fc.option(fc.string(), { nil: undefined });
  const event: fc.Arbitrary<MetricsCollectorEvent> = fc.oneof(
    fc.constant({ type: 'initialized' as const }),
    error.map((e) => (e === undefined ? { type: 'binding_missing' as const } : { type: 'binding_missing' as const, error: e })),
    error.map((e) => (e === undefined ? { type: 'runtime_error' as const } : { type: 'runtime_error' as const, error: e })),
    fc.constant({ type: 'retry' as const }),
    fc.constant({ type: 'recovered' as const }),
    fc.constant({ type: 'archive_triggered' as const }),
    fc.constant({ type: 'archive_done' as const }),
  );
  it('random event sequences keep every machine property; RUNNING carries no error', () => {
    checkMachineProperties(metricsCollector, {
      event,
      onAccepted: (_, __, next) => {
        if (next.value === 'RUNNING' || next.value === 'ARCHIVING') expect(next.error).toBeUndefined();
      },
    });
  });
});
