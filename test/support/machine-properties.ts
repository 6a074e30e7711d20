import fc from 'fast-check';
import { expect } from 'vitest';
import type { EventObject, Machine } from '../../src/index.js';

export interface PropertyOptions<S, E extends EventObject, I> {
  /** Arbitrary of valid events (each must pass the event schema). */
  event: fc.Arbitrary<E>;
  /** Arbitrary of spawn inputs; defaults to `undefined` for machines without input. */
  input?: fc.Arbitrary<I>;
  /** Longest random sequence; default 60. Lengths range over all of it (fast-check's default size would stop near 10). */
  maxLength?: number;
  /** Runs; default 300. */
  numRuns?: number;
  /** Extra assertion on every accepted step (`prev` -> `next` by `event`). */
  onAccepted?: (prev: S, event: E, next: S) => void;
}

const valueOf = (state: unknown): string | undefined =>
  typeof state === 'object' && state !== null && 'value' in state ? String((state as { value: unknown }).value) : undefined;

/**
 * The properties every machine keeps, over random event sequences:
 * never throws; every reached state passes the state schema; a rejected event returns the same
 * object and `step` says why; an accepted one returns a new object and a rune kind; terminal
 * states absorb every event; `transition` and `step` agree.
 */
export function checkMachineProperties<S, E extends EventObject, I>(machine: Machine<S, E, I>, options: PropertyOptions<S, E, I>): void {
  const input = options.input ?? (fc.constant(undefined) as unknown as fc.Arbitrary<I>);
  fc.assert(
    fc.property(input, fc.array(options.event, { maxLength: options.maxLength ?? 60, size: 'max' }), (inp, events) => {
      let state = machine.initial(inp);
      expect(machine.schemas.state.safeParse(state).success).toBe(true);
      expect(machine.schemas.input.safeParse(inp).success).toBe(true);
      for (const event of events) {
        expect(machine.schemas.event.safeParse(event).success, `arbitrary made an invalid event ${JSON.stringify(event)}`).toBe(true);
        const wasTerminal = machine.terminal.includes(valueOf(state) ?? '\u0000');
        const next = machine.transition(state, event);
        const step = machine.step(state, event);
        if (next === state) {
          expect(step.accepted).toBe(false);
          if (!step.accepted) {
            expect(step.state).toBe(state);
            expect(step.reason.length).toBeGreaterThan(0);
            if (wasTerminal) {
              expect(step.code).toBe('terminal_state');
              expect(step.reason).toBe('terminal state');
            }
          }
        } else {
          expect(wasTerminal, `terminal state ${valueOf(state)} accepted ${event.type}`).toBe(false);
          expect(step.accepted).toBe(true);
          expect(step.state).toEqual(next);
          if (step.accepted) expect(step.kind.length).toBeGreaterThan(0);
          const parsed = machine.schemas.state.safeParse(next);
          expect(parsed.success, `state after ${event.type} fails its schema: ${JSON.stringify(next)}`).toBe(true);
          if (machine.states.length > 0) expect(machine.states).toContain(valueOf(next));
          options.onAccepted?.(state, event, next);
          state = next;
        }
      }
    }),
    { numRuns: options.numRuns ?? 300 },
  );
}

/** A state of a finite machine at `value`, built from the initial state plus context fields. */
export function stateAt<S extends { value: string }, I>(machine: Machine<S, EventObject, I>, value: S['value'], context: Partial<S> = {}, input?: I): S {
  return { ...machine.initial(input as I), ...context, value };
}

/** Every terminal state rejects every event (one sample of each type) with "terminal state". */
export function expectTerminalsAbsorb<S extends { value: string }, E extends EventObject, I>(machine: Machine<S, E, I>, samples: readonly E[], input?: I): void {
  const types = new Set(samples.map((e) => e.type));
  expect([...types].sort(), 'the samples must cover every event type').toEqual([...machine.events].sort());
  for (const t of machine.terminal) {
    const state = stateAt(machine as Machine<S, EventObject, I>, t as S['value'], {}, input);
    for (const event of samples) {
      expect(machine.transition(state, event)).toBe(state);
      const step = machine.step(state, event);
      expect(step).toMatchObject({ accepted: false, code: 'terminal_state', reason: 'terminal state' });
    }
  }
}

/** One accepted row: `step` moves `state` to `to` with rune `kind` (default: the event type) and `transition` agrees; returns `transition`'s state. */
export function expectRow<S extends { value: string }, E extends EventObject, I>(machine: Machine<S, E, I>, state: S, event: E, to: S['value'], kind: string = event.type): S {
  expect(machine.step(state, event)).toMatchObject({ accepted: true, state: { value: to }, kind });
  const next = machine.transition(state, event);
  expect(next.value).toBe(to);
  return next;
}

/** A row checked with its context: in `from` with `context`, `event` moves to `to` with the fields `after`. */
export interface ContextRow<S extends { value: string }, E extends EventObject> {
  from: S['value'];
  context: Partial<S>;
  event: E;
  to: S['value'];
  after: Partial<S>;
}

/** One accepted row with context: `step` moves `state` to `to` with the fields `after` and the event type as rune kind; `transition` returns an equal state. */
export function expectRowAfter<S extends { value: string }, E extends EventObject, I>(machine: Machine<S, E, I>, state: S, event: E, to: S['value'], after: Partial<S>): void {
  const step = machine.step(state, event);
  expect(step).toMatchObject({ accepted: true, state: { value: to, ...after }, kind: event.type });
  expect(machine.transition(state, event)).toEqual(step.state);
}

/** Neither `transition` nor `step` throws in any of `states` for any of `events`, even hand-built ones that skip validation. */
export function expectNeverThrows<S, E extends EventObject, I>(machine: Machine<S, E, I>, states: readonly S[], events: readonly unknown[]): void {
  for (const state of states) {
    for (const event of events) {
      expect(() => machine.transition(state, event as E)).not.toThrow();
      expect(() => machine.step(state, event as E)).not.toThrow();
    }
  }
}

/** `event` does not apply in `state`: `step` returns the same object with code `not_allowed` and `reason`, and `transition` returns `state` itself. */
export function expectNotAllowed<S, E extends EventObject, I>(machine: Machine<S, E, I>, state: S, event: E, reason: string): void {
  expect(machine.step(state, event)).toEqual({ accepted: false, state, code: 'not_allowed', reason });
  expect(machine.transition(state, event)).toBe(state);
}
