import { describeIssues } from '../../reducers/validate.js';
import { CALLER_ORIGIN, RuneOrigin } from '../../reducers/rune-origin.js';

/** Frozen origins found valid, with what a rune records of each: the few a process uses (one per epic, one per client) are checked once each. */
const checked = new WeakMap<object, RuneOrigin>([[CALLER_ORIGIN, CALLER_ORIGIN]]);

/**
 * The origin a rune records for `origin` as a caller gave it: a frozen copy of its known keys
 * (the caller's later changes reach no rune), made once for a frozen one; a string saying why
 * when it is not a {@link RuneOrigin}.
 */
export function checkedOrigin(origin: unknown): RuneOrigin | string {
  const known = typeof origin === 'object' && origin !== null ? checked.get(origin) : undefined;
  if (known !== undefined) return known;
  const parsed = RuneOrigin.safeParse(origin);
  if (!parsed.success) return `invalid origin: ${describeIssues(parsed.error.issues)}`;
  const recorded = Object.freeze(parsed.data);
  if (Object.isFrozen(origin)) checked.set(origin as object, recorded);
  return recorded;
}
