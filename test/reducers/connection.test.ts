import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { connection, edgesOf, stepUnknown, type ConnectionEvent, type ConnectionState } from '../../src/index.js';
import { checkMachineProperties, type ContextRow, expectRowAfter, expectTerminalsAbsorb, stateAt } from '../support/machine-properties.js';
import { drawnEdges, eventsByLabel, missingDrawnEdges, readSeed } from '../support/seed-diagram.js';

const at = (value: ConnectionState['value'], context: Partial<ConnectionState> = {}) => stateAt(connection, value, context);

const samples: ConnectionEvent[] = [
  { type: 'open_socket' },
  { type: 'handshake_success' },
  { type: 'subscribe', stream: 'chat-1' },
  { type: 'unsubscribe', stream: 'chat-1' },
  { type: 'close' },
  { type: 'error', error: 'ECONNRESET' },
  { type: 'schedule_reconnect' },
  { type: 'reconnect' },
];

describe('connection: seed 002 diagram 4, edge by edge', () => {
  const rows: ContextRow<ConnectionState, ConnectionEvent>[] = [
    { from: 'DISCONNECTED', context: { attempt: 2 }, event: { type: 'open_socket' }, to: 'CONNECTING', after: { attempt: 2 } },
    { from: 'CONNECTING', context: { attempt: 2, error: 'x' }, event: { type: 'handshake_success' }, to: 'OPEN', after: { attempt: 0, error: undefined } },
    { from: 'OPEN', context: {}, event: { type: 'subscribe', stream: 'job-7' }, to: 'SUBSCRIBED', after: { subscriptions: 1 } },
    { from: 'OPEN', context: {}, event: { type: 'close' }, to: 'DISCONNECTED', after: { subscriptions: 0, error: undefined } },
    { from: 'OPEN', context: {}, event: { type: 'error', error: 'ECONNRESET' }, to: 'DISCONNECTED', after: { subscriptions: 0, error: 'ECONNRESET' } },
    { from: 'SUBSCRIBED', context: { subscriptions: 1 }, event: { type: 'unsubscribe', stream: 'job-7' }, to: 'OPEN', after: { subscriptions: 0 } },
    { from: 'DISCONNECTED', context: { attempt: 2 }, event: { type: 'schedule_reconnect' }, to: 'RECONNECTING', after: { attempt: 3 } },
    { from: 'RECONNECTING', context: { attempt: 3 }, event: { type: 'reconnect' }, to: 'CONNECTING', after: { attempt: 3 } },
  ];
  it.each(rows)('$from + $event.type -> $to', ({ from, context, event, to, after }) => {
    expectRowAfter(connection, at(from, context), event, to, after);
  });

  it('every transition drawn in the seed is in the table', () => {
    const drawn = drawnEdges(readSeed('002_2417c8b666a13ea4.txt'), '## 4) StreamingService');
    expect(drawn).toHaveLength(7);
    const labelToEvents: Record<string, string[]> = {
      'open socket': ['open_socket'],
      'handshake success': ['handshake_success'],
      'subscribe to job': ['subscribe'],
      'close / error': ['close', 'error'],
      unsubscribe: ['unsubscribe'],
      'reconnect scheduler': ['schedule_reconnect'],
    };
    const unlabeled: Record<string, string[]> = { 'RECONNECTING --> CONNECTING': ['reconnect'] };
    expect(missingDrawnEdges(edgesOf(connection), drawn, eventsByLabel(labelToEvents, unlabeled))).toEqual([]);
  });
});

describe('connection: DESIGN.md resolution and extensions', () => {
  it.each(['close', 'error'] as const)('%s from SUBSCRIBED drops the socket and every subscription (SUBSCRIBED is a child of OPEN)', (type) => {
    expect(connection.transition(at('SUBSCRIBED', { subscriptions: 3 }), { type })).toMatchObject({ value: 'DISCONNECTED', subscriptions: 0 });
  });

  it.each(['close', 'error'] as const)('%s during the handshake returns to DISCONNECTED (extension)', (type) => {
    expect(connection.transition(at('CONNECTING'), { type }).value).toBe('DISCONNECTED');
  });

  it('one socket carries several streams: unsubscribing one of them stays SUBSCRIBED (extension)', () => {
    const events: ConnectionEvent[] = [
      { type: 'open_socket' },
      { type: 'handshake_success' },
      { type: 'subscribe', stream: 'a' },
      { type: 'subscribe', stream: 'b' },
      { type: 'unsubscribe', stream: 'a' },
    ];
    const state = events.reduce(connection.transition, connection.initial());
    expect(state).toMatchObject({ value: 'SUBSCRIBED', subscriptions: 1 });
    expect(connection.transition(state, { type: 'unsubscribe', stream: 'b' })).toMatchObject({ value: 'OPEN', subscriptions: 0 });
  });

  it('counts scheduled reconnects until a handshake succeeds, for the backoff', () => {
    const cycle: ConnectionEvent[] = [{ type: 'schedule_reconnect' }, { type: 'reconnect' }, { type: 'error', error: 'refused' }];
    const failedTwice = [...cycle, ...cycle].reduce(connection.transition, connection.initial());
    expect(failedTwice).toEqual({ value: 'DISCONNECTED', subscriptions: 0, attempt: 2, error: 'refused' });
    const reconnected = [{ type: 'open_socket' } as const, { type: 'handshake_success' } as const].reduce(connection.transition, failedTwice);
    expect(reconnected).toMatchObject({ value: 'OPEN', attempt: 0, error: undefined });
  });

  it('has no terminal state', () => {
    expect(connection.terminal).toEqual([]);
    expectTerminalsAbsorb(connection, samples);
  });

  it('rejects an event that does not apply with the same object and a reason', () => {
    const open = at('OPEN');
    expect(connection.step(open, { type: 'unsubscribe' })).toEqual({
      accepted: false,
      state: open,
      code: 'not_allowed',
      reason: 'event "unsubscribe" is not allowed in state "OPEN"',
    });
    const reconnecting = at('RECONNECTING');
    expect(connection.transition(reconnecting, { type: 'handshake_success' })).toBe(reconnecting);
  });

  it('extension: a client closed while it waits to reconnect ends DISCONNECTED', () => {
    expect(connection.transition(at('RECONNECTING'), { type: 'close' })).toMatchObject({ value: 'DISCONNECTED' });
  });
});

describe('connection: bad input', () => {
  it('names the field of an event that fails its schema', () => {
    const step = stepUnknown(connection, at('OPEN'), { type: 'subscribe', stream: '' });
    expect(step).toMatchObject({ accepted: false, code: 'invalid_event' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(`"invalid "subscribe" event: stream: Too small: expected string to have >=1 characters"`);
  });

  it('rejects an unknown event type by name', () => {
    const step = stepUnknown(connection, at('OPEN'), { type: 'ping' });
    expect(!step.accepted && step.reason).toMatchInlineSnapshot(
      `"unknown event type "ping" for machine "connection"; expected one of: open_socket, handshake_success, subscribe, unsubscribe, close, error, schedule_reconnect, reconnect"`,
    );
  });
});

describe('connection: properties', () => {
  const stream = fc.option(fc.string({ minLength: 1 }), { nil: undefined });
  const event: fc.Arbitrary<ConnectionEvent> = fc.oneof(
    fc.constant({ type: 'open_socket' as const }),
    fc.constant({ type: 'handshake_success' as const }),
    stream.map((s) => (s === undefined ? { type: 'subscribe' as const } : { type: 'subscribe' as const, stream: s })),
    stream.map((s) => (s === undefined ? { type: 'unsubscribe' as const } : { type: 'unsubscribe' as const, stream: s })),
    fc.constant({ type: 'close' as const }),
    fc.option(fc.string(), { nil: undefined }).map((e) => (e === undefined ? { type: 'error' as const } : { type: 'error' as const, error: e })),
    fc.constant({ type: 'schedule_reconnect' as const }),
    fc.constant({ type: 'reconnect' as const }),
  );
  it('random event sequences keep every machine property; SUBSCRIBED exactly while a subscription is open', () => {
    checkMachineProperties(connection, {
      event,
      onAccepted: (prev, e, next) => {
        expect(next.value === 'SUBSCRIBED').toBe(next.subscriptions > 0);
        if (e.type === 'subscribe') expect(next.subscriptions).toBe(prev.subscriptions + 1);
        if (e.type === 'unsubscribe') expect(next.subscriptions).toBe(prev.subscriptions - 1);
        if (e.type === 'schedule_reconnect') expect(next.attempt).toBe(prev.attempt + 1);
        if (next.value === 'OPEN' || next.value === 'SUBSCRIBED') expect(next.attempt).toBe(0);
      },
    });
  });
});
