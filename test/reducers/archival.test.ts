import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { archival, edgesOf, stepUnknown, type ArchivalEvent, type ArchivalState } from '../../src/index.js';
import { checkMachineProperties, type ContextRow, expectRowAfter, expectTerminalsAbsorb, stateAt } from '../support/machine-properties.js';
import { drawnEdges, eventsByLabel, missingDrawnEdges, readSeed } from '../support/seed-diagram.js';

const at = (value: ArchivalState['value'], context: Partial<ArchivalState> = {}) => stateAt(archival, value, context);

const samples: ArchivalEvent[] = [
  { type: 'start' },
  { type: 'serialized' },
  { type: 'write_succeeded' },
  { type: 'write_failed', error: '503 from R2' },
  { type: 'retry' },
  { type: 'rewrite' },
  { type: 'reset' },
];

describe('archival: seed 002 diagram 6, edge by edge', () => {
  const rows: ContextRow<ArchivalState, ArchivalEvent>[] = [
    { from: 'IDLE', context: { attempts: 3, error: 'old' }, event: { type: 'start' }, to: 'ARCHIVING', after: { attempts: 0, error: undefined } },
    { from: 'ARCHIVING', context: {}, event: { type: 'serialized' }, to: 'WRITING_TO_R2', after: { attempts: 1 } },
    { from: 'WRITING_TO_R2', context: { attempts: 1 }, event: { type: 'write_succeeded' }, to: 'COMPLETED', after: { attempts: 1 } },
    { from: 'WRITING_TO_R2', context: { attempts: 1 }, event: { type: 'write_failed', error: '503' }, to: 'ERROR', after: { attempts: 1, error: '503' } },
    { from: 'ERROR', context: { attempts: 1, error: '503' }, event: { type: 'retry' }, to: 'RETRYING', after: { attempts: 1, error: '503' } },
    { from: 'RETRYING', context: { attempts: 1 }, event: { type: 'rewrite' }, to: 'WRITING_TO_R2', after: { attempts: 2 } },
    { from: 'COMPLETED', context: { attempts: 2 }, event: { type: 'reset' }, to: 'IDLE', after: { attempts: 2 } },
  ];
  it.each(rows)('$from + $event.type -> $to', ({ from, context, event, to, after }) => {
    expectRowAfter(archival, at(from, context), event, to, after);
  });

  it('every transition drawn in the seed is in the table', () => {
    const drawn = drawnEdges(readSeed('002_2417c8b666a13ea4.txt'), '## 6) ArchivalService');
    expect(drawn).toHaveLength(7);
    const labelToEvents: Record<string, string[]> = {
      'scheduled or manual': ['start'],
      'serialize & write': ['serialized'],
      success: ['write_succeeded'],
      'write failed': ['write_failed'],
      'retry with backoff': ['retry'],
    };
    const unlabeled: Record<string, string[]> = {
      'RETRYING --> WRITING_TO_R2': ['rewrite'],
      'COMPLETED --> IDLE': ['reset'],
    };
    expect(missingDrawnEdges(edgesOf(archival), drawn, eventsByLabel(labelToEvents, unlabeled))).toEqual([]);
  });
});

describe('archival: extension, context and rejections', () => {
  it('a snapshot that cannot be serialized fails the run like a write, so it can be retried (extension)', () => {
    const failed = archival.transition(at('ARCHIVING'), { type: 'write_failed', error: 'KV list failed' });
    expect(failed).toEqual({ value: 'ERROR', attempts: 0, error: 'KV list failed' });
    const rewriting = archival.transition(archival.transition(failed, { type: 'retry' }), { type: 'rewrite' });
    expect(rewriting).toMatchObject({ value: 'WRITING_TO_R2', attempts: 1 });
  });

  it('counts every write of a run, and a new run starts counting again', () => {
    const run: ArchivalEvent[] = [
      { type: 'start' },
      { type: 'serialized' },
      { type: 'write_failed', error: 'timeout' },
      { type: 'retry' },
      { type: 'rewrite' },
      { type: 'write_failed' },
      { type: 'retry' },
      { type: 'rewrite' },
      { type: 'write_succeeded' },
    ];
    const completed = run.reduce(archival.transition, archival.initial());
    // The second failure said nothing, so the first one's error is kept.
    expect(completed).toEqual({ value: 'COMPLETED', attempts: 3, error: 'timeout' });
    const next = [{ type: 'reset' } as const, { type: 'start' } as const].reduce(archival.transition, completed);
    expect(next).toMatchObject({ value: 'ARCHIVING', attempts: 0, error: undefined });
  });

  it('has no terminal state', () => {
    expect(archival.terminal).toEqual([]);
    expectTerminalsAbsorb(archival, samples);
  });

  it('rejects an event that does not apply with the same object and a reason', () => {
    const error = at('ERROR', { attempts: 1 });
    expect(archival.step(error, { type: 'start' })).toEqual({
      accepted: false,
      state: error,
      code: 'not_allowed',
      reason: 'event "start" is not allowed in state "ERROR"',
    });
    const writing = at('WRITING_TO_R2');
    expect(archival.transition(writing, { type: 'rewrite' })).toBe(writing);
  });
});

describe('archival: bad input', () => {
  it('names the field of an event that fails its schema', () => {
    const step = stepUnknown(archival, at('WRITING_TO_R2'), { type: 'write_failed', error: null });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(`"invalid "write_failed" event: error: Invalid input: expected string, received null"`);
  });

  it('rejects an unknown event type by name', () => {
    const step = stepUnknown(archival, at('IDLE'), { type: 'purge' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"unknown event type "purge" for machine "archival"; expected one of: start, serialized, write_succeeded, write_failed, retry, rewrite, reset"`,
    );
  });
});

describe('archival: properties', () => {
  const event: fc.Arbitrary<ArchivalEvent> = fc.oneof(
    fc.constant({ type: 'start' as const }),
    fc.constant({ type: 'serialized' as const }),
    fc.constant({ type: 'write_succeeded' as const }),
    fc.option(fc.string(), { nil: undefined }).map((e) => (e === undefined ? { type: 'write_failed' as const } : { type: 'write_failed' as const, error: e })),
    fc.constant({ type: 'retry' as const }),
    fc.constant({ type: 'rewrite' as const }),
    fc.constant({ type: 'reset' as const }),
  );
  it('random event sequences keep every machine property; attempts grows exactly when a write starts', () => {
    checkMachineProperties(archival, {
      event,
      onAccepted: (prev, _, next) => {
        if (next.value === 'WRITING_TO_R2') expect(next.attempts).toBe(prev.attempts + 1);
        else if (next.value === 'ARCHIVING') expect(next.attempts).toBe(0);
        else expect(next.attempts).toBe(prev.attempts);
      },
    });
  });
});
