import type { z } from 'zod';
import type { AnyMachine, EventOf, Machine, RejectionCode, Step } from './machine.js';
import { unknownEventReason } from './table.js';

/** The outcome of checking an untrusted value against a machine's event schema. */
export type EventCheck<E> =
  | { ok: true; event: E }
  | { ok: false; code: Extract<RejectionCode, 'unknown_event' | 'invalid_event'>; reason: string; issues: readonly z.core.$ZodIssue[] };

/** How many issues {@link describeIssues} describes; the rest are counted. */
const MAX_DESCRIBED_ISSUES = 5;
/** The most characters shown of one issue (its path and message), and of one path segment. */
const MAX_ISSUE_CHARS = 200;
const MAX_SEGMENT_CHARS = 40;
/** A longer path shows its first and last few segments around an ellipsis. */
const PATH_HEAD = 4;
const PATH_TAIL = 3;

/** `text`, cut to `max` characters with an ellipsis. */
const truncate = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/**
 * A path as dotted text, bounded whatever the path: each segment cut to 40 characters, and a path
 * of more than 7 segments shown as its first 4 and last 3, e.g. `event.a.b.c.d.….x.y.z`. `root`
 * (`event`, `input`) comes first when given; an empty path without one is `(root)`.
 */
export function describePath(path: readonly PropertyKey[], root?: string): string {
  const shown = path.length > PATH_HEAD + PATH_TAIL ? [...path.slice(0, PATH_HEAD), '…', ...path.slice(-PATH_TAIL)] : path;
  const segments = shown.map((segment) => truncate(String(segment), MAX_SEGMENT_CHARS));
  if (root !== undefined) segments.unshift(root);
  return segments.length > 0 ? segments.join('.') : '(root)';
}

/**
 * One line naming the failing fields, e.g. `userId: Invalid UUID; reason: expected string`.
 * Bounded whatever was parsed: the first 5 issues (each cut to 200 characters), then
 * `; and N more issues`; the rest are only counted.
 */
export function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  const described = Math.min(issues.length, MAX_DESCRIBED_ISSUES);
  let text = '';
  for (let i = 0; i < described; i++) {
    const issue = issues[i]!;
    text += `${i > 0 ? '; ' : ''}${truncate(`${describePath(issue.path)}: ${issue.message}`, MAX_ISSUE_CHARS)}`;
  }
  const more = issues.length - described;
  return more > 0 ? `${text}; and ${more} more issue${more === 1 ? '' : 's'}` : text;
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
export function eventRejection(machine: AnyMachine, value: unknown, issues: readonly z.core.$ZodIssue[]): Omit<Extract<EventCheck<never>, { ok: false }>, 'ok'> {
  const type = typeof value === 'object' && value !== null ? (value as { type?: unknown }).type : undefined;
  if (typeof type !== 'string') {
    return { code: 'invalid_event', reason: `invalid event: expected an object with a string "type", got ${describeValue(value)}`, issues: [] };
  }
  if (!eventTypesOf(machine).has(type)) {
    // Cut: an unknown type may be as long as the limits allow, and the reason must stay small.
    return { code: 'unknown_event', reason: unknownEventReason(machine.id, truncate(type, MAX_SEGMENT_CHARS), machine.events), issues: [] };
  }
  return { code: 'invalid_event', reason: `invalid "${type}" event: ${describeIssues(issues)}`, issues };
}

/**
 * Validates an untrusted event, then steps the machine: what an engine does with every dispatch.
 * Rejections carry a stable `code` and a reason naming what was wrong.
 */
export function stepUnknown<S, E extends { type: string }, I>(machine: Machine<S, E, I>, state: S, value: unknown): Step<S> {
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
