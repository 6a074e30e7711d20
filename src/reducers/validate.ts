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
 * `; and N more issues`; the rest are only counted. `partial` (from {@link parseBounded}: the
 * check stopped at the first failing field) adds that there may be more.
 */
export function describeIssues(issues: readonly z.core.$ZodIssue[], partial = false): string {
  const described = Math.min(issues.length, MAX_DESCRIBED_ISSUES);
  let text = '';
  for (let i = 0; i < described; i++) {
    const issue = issues[i]!;
    text += `${i > 0 ? '; ' : ''}${truncate(`${describePath(issue.path)}: ${issue.message}`, MAX_ISSUE_CHARS)}`;
  }
  const more = issues.length - described;
  if (more > 0) text += `; and ${more} more issue${more === 1 ? '' : 's'}`;
  return partial ? `${text}${PARTIAL_NOTE}` : text;
}

/** A value of more nodes (objects, arrays and leaves, counted from the root) that fails is described only up to its first failing field. */
export const MAX_NODES_CHECKED_WHOLE = 256;
const PARTIAL_NOTE = `; maybe more (a value of over ${MAX_NODES_CHECKED_WHOLE} parts is checked only up to its first failing field)`;

/**
 * zod's own flag for "stop at the first failure", the one its `validate()` sets (internal: not in
 * the public `ParseContext` type): each container stops before its next child once one has
 * failed. `async` first: zod copies the context on every parse, and this shape copies cheaply.
 * This is the one place that passes it; test/server/bounded-errors.test.ts counts the issues a
 * large wrong value materializes, so a zod that drops or renames it fails there.
 */
const STOP_AT_FIRST_FAILURE = { async: false, abortEarly: true } as z.core.ParseContext<z.core.$ZodIssue>;

/** The outcome of {@link parseBounded}: the data, or the issues found and whether the check stopped early. */
export type BoundedParse<T> = { success: true; data: T } | { success: false; issues: readonly z.core.$ZodIssue[]; partial: boolean };

/** Whether `value` has at most `max` nodes; walks at most `max + 1` of them. */
function nodesWithin(value: unknown, max: number): boolean {
  let budget = max;
  const visit = (node: unknown): boolean => {
    if (--budget < 0) return false;
    if (typeof node !== 'object' || node === null) return true;
    if (Array.isArray(node)) {
      for (const item of node) if (!visit(item)) return false;
      return true;
    }
    for (const key in node) if (!visit((node as Record<string, unknown>)[key])) return false;
    return true;
  };
  return visit(value);
}

/**
 * `schema.safeParse(value)` with the work spent on a failure bounded, whatever the value: a wrong
 * value's cost in zod grows with its issues (10,000 wrong array elements are 10,000 issues, or
 * more inside unions), so the first parse stops at the first failing field of each container.
 * A value that passes costs what `safeParse` does. One that fails is parsed again whole, for
 * every issue and their count, only when it has at most {@link MAX_NODES_CHECKED_WHOLE} nodes;
 * a larger one is described by the issues found before stopping (`partial`). What the engine,
 * the WebSocket and every HTTP route use before {@link describeIssues}.
 *
 * ## Example
 * ```ts
 * import { z } from 'zod';
 * import { describeIssues, parseBounded } from './validate.js';
 * const ids = z.array(z.string());
 * const small = parseBounded(ids, [1, 2]);
 * if (!small.success) console.log(describeIssues(small.issues, small.partial));
 * // Logs: 0: Invalid input: expected string, received number; 1: Invalid input: expected string, received number
 * const large = parseBounded(ids, Array.from({ length: 10_000 }, () => 1));
 * if (!large.success) console.log(large.issues.length, large.partial); // Logs: 1 true
 * ```
 */
export function parseBounded<T>(schema: z.ZodType<T>, value: unknown): BoundedParse<T> {
  let first: z.ZodSafeParseResult<T> | undefined;
  try {
    first = schema.safeParse(value, STOP_AT_FIRST_FAILURE);
  } catch {
    // A stopped container leaves its value unfinished, which some schema (an intersection merging
    // two) may trip on: the whole parse below answers as safeParse does.
  }
  if (first?.success === true) return first;
  if (first !== undefined && !nodesWithin(value, MAX_NODES_CHECKED_WHOLE)) return { success: false, issues: first.error.issues, partial: true };
  const whole = schema.safeParse(value);
  return whole.success ? { success: true, data: whole.data } : { success: false, issues: whole.error.issues, partial: false };
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
  const parsed = parseBounded(machine.schemas.event, value);
  if (parsed.success) return { ok: true, event: parsed.data as EventOf<M> };
  return { ok: false, ...eventRejection(machine, value, parsed.issues, parsed.partial) };
}

/**
 * Why a value that failed a machine's event schema (with `issues`) is refused: no string `type`,
 * an unknown `type` (named, with the types the machine accepts), or the fields that failed.
 * For a caller that ran the parse itself ({@link parseBounded}, `partial` its flag), as the engine
 * does on every dispatch.
 */
export function eventRejection(
  machine: AnyMachine,
  value: unknown,
  issues: readonly z.core.$ZodIssue[],
  partial = false,
): Omit<Extract<EventCheck<never>, { ok: false }>, 'ok'> {
  const type = typeof value === 'object' && value !== null ? (value as { type?: unknown }).type : undefined;
  if (typeof type !== 'string') {
    return { code: 'invalid_event', reason: `invalid event: expected an object with a string "type", got ${describeValue(value)}`, issues: [] };
  }
  if (!eventTypesOf(machine).has(type)) {
    // Cut: an unknown type may be as long as the limits allow, and the reason must stay small.
    return { code: 'unknown_event', reason: unknownEventReason(machine.id, truncate(type, MAX_SEGMENT_CHARS), machine.events), issues: [] };
  }
  return { code: 'invalid_event', reason: `invalid "${type}" event: ${describeIssues(issues, partial)}`, issues };
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
