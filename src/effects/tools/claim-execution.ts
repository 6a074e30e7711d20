import { EMPTY, Observable, defer, filter, map, merge, mergeMap, of, take } from 'rxjs';
import { z } from 'zod';
import type { toolCall } from '../../reducers/tool-call/machine.js';
import { Claim, type ToolCallEvent } from '../../reducers/tool-call/schema.js';
import type { StreamView } from '../../streams/state-effects.js';

/**
 * Claims a tool call for one run, durably, before anything runs: emits `claimEvent` (dispatched like
 * any effect output), the event that records `claim` on the call, and subscribes `run$` only once
 * the claim recorded is this one. The tool-call machine's calls (`execution_claimed`), a ReAct
 * agent's own tool calls (`tool-call-claimed`) and delegated calls all start through it.
 *
 * 1. `recorded$`, the claims recorded on the call as this runner hears them (its stream's later
 *    runes), is subscribed first, then the claim is emitted (a store that answers at once
 *    publishes its rune during the emission).
 * 2. The first claim heard decides: this one, so `run$` is subscribed, after the claim is durable
 *    (runes are published after their commit). Another's: nothing runs (the machine refused this
 *    claim: another runner has the call).
 * 3. A claim whose dispatch fails (the store failed, or this process was fenced) is never heard:
 *    nothing runs, and the call, left in flight unclaimed, is claimed by the next process that
 *    takes it over, as after a restart. Unsubscribing (the call left in flight) stops waiting.
 *
 * @see executionStart, which decides whether a call is claimed, and what a claim supersedes.
 */
export function claimThenRun<T>(recorded$: Observable<string>, claim: string, claimEvent: T, run$: Observable<T>): Observable<T> {
  return defer(() => {
    const outcome$ = recorded$.pipe(
      take(1),
      mergeMap((heard) => (heard === claim ? run$ : EMPTY)),
    );
    return merge(outcome$, of(claimEvent));
  });
}

/**
 * {@link claimThenRun} for a tool-call machine's call in `executing` (run by the tool-call effects,
 * or by a delegation): `execution_claimed{claim, supersedes?}`, heard on the call's later runes.
 */
export function claimCallThenRun<T>(view: StreamView<typeof toolCall>, claim: string, supersedes: string | undefined, run$: Observable<T>): Observable<T | ToolCallEvent> {
  const recorded$ = view.later$.pipe(
    map((rune) => rune.event),
    filter((event) => event.type === 'execution_claimed'),
    map((event) => event.claim),
  );
  const event: ToolCallEvent = { type: 'execution_claimed', claim, ...(supersedes === undefined ? {} : { supersedes }) };
  return claimThenRun<T | ToolCallEvent>(recorded$, claim, event, run$);
}

/** The `claim` field of every claim event. */
const ClaimField = z.object({ claim: Claim });

/** A new claim id from `claimId`, as every machine's claim event takes it, else a throw naming what it gave. */
export function checkedClaim(claimId: () => string): string {
  const check = ClaimField.safeParse({ claim: claimId() });
  if (check.success) return check.data.claim;
  throw new TypeError(`"claimId" gave an id the machine refuses: ${z.prettifyError(check.error)}`);
}

/** A claim id unique across the processes sharing a log: a random UUID (the default `claimId`). */
export const randomClaimId = (): string => globalThis.crypto.randomUUID();
