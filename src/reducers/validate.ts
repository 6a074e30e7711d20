import type { z } from 'zod';
import type { AnyMachine, EventOf, Machine, RejectionCode, Step } from './machine.js';
import { unknownEventReason } from './table.js';

/** The outcome of checking an untrusted value against a machine's event schema. */
export type EventCheck<E> =
  | { ok: true; event: E }
  | { ok: false; code: Extract<RejectionCode, 'unknown_event' | 'invalid_event'>; reason: string; issues: readonly z.core.$ZodIssue[] };

/** One line naming every failing field, e.g. `userId: Invalid UUID; reason: expected string`. */
export function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues.map((i) => `${i.path.length > 0 ? i.path.join('.') : '(root)'}: ${i.message}`).join('; ');
}

const eventTypeSets = new WeakMap<AnyMachine, ReadonlySet<string>>();
/** The machine's event types as a set: checked on every dispatch, so not a linear scan. */
function eventTypesOf(machine: AnyMachine): ReadonlySet<string> {
  let types = eventTypeSets.get(machine);
  if (types === undefined) eventTypeSets.set(machine, (types = new Set(machine.events)));
  return types;
}

/**
 * Checks an untrusted value (a parsed JSON message, say) against a machine's event schema.
 * An unknown `type` is reported by name, listing the types the machine accepts; a payload that
 * misses its schema is reported naming each failing field. Never throws.
 */
export function validateEvent<M extends AnyMachine>(machine: M, value: unknown): EventCheck<EventOf<M>> {
  const parsed = machine.schemas.event.safeParse(value);
  if (parsed.success) return { ok: true, event: parsed.data as EventOf<M> };
  return { ok: false, ...eventRejection(machine, value, parsed.error.issues) };
}

/**
 * Why a value that failed a machine's event schema (with `issues`) is refused: no string `type`,
 * an unknown `type` (named, with the types the machine accepts), or the fields that failed.
 * For a caller that ran the parse itself, as the engine does on every dispatch.
 */
export function eventRejection(
  machine: AnyMachine,
  value: unknown,
  issues: readonly z.core.$ZodIssue[],
): Omit<Extract<EventCheck<never>, { ok: false }>, 'ok'> {
  const type = typeof value === 'object' && value !== null ? (value as { type?: unknown }).type : undefined;
  if (typeof type !== 'string') {
    return { code: 'invalid_event', reason: `invalid event: expected an object with a string "type", got ${describeValue(value)}`, issues: [] };
  }
  if (!eventTypesOf(machine).has(type)) {
    return { code: 'unknown_event', reason: unknownEventReason(machine.id, type, machine.events), issues: [] };
  }
  return { code: 'invalid_event', reason: `invalid "${type}" event: ${describeIssues(issues)}`, issues };
}

/**
 * Validates an untrusted event, then steps the machine: what an engine does with every dispatch.
 * Rejections carry a stable `code` and a reason naming what was wrong.
 */
export function stepUnknown<S, E extends { type: string }, I>(
  machine: Machine<S, E, I>,
  state: S,
  value: unknown,
): Step<S> {
  const check = validateEvent(machine as AnyMachine, value);
  if (!check.ok) return { accepted: false, state, code: check.code, reason: check.reason };
  return machine.step(state, check.event as E);
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object without a string "type"';
  return typeof value;
}
