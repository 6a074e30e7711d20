import { EMPTY, Observable, defer, filter, map, merge, mergeMap, of, take } from 'rxjs';
import type { toolCall } from '../../reducers/tool-call/machine.js';
import type { ToolCallEvent } from '../../reducers/tool-call/schema.js';
import type { StreamView } from '../../streams/state-effects.js';

/**
 * Claims a call in `executing` for one run, durably, before anything runs: emits
 * `execution_claimed{claim, supersedes}` (dispatched like any effect output) and subscribes
 * `run$` only once the claim recorded is this one.
 *
 * 1. The stream's later runes are subscribed first, then the claim is emitted (a store that
 *    answers at once publishes its rune during the emission).
 * 2. The first `tool.claimed` heard decides: its claim is this one, so `run$` is subscribed, after
 *    the claim is durable (runes are published after their commit). Another's: nothing runs (the
 *    machine refused this claim: another runner has the call).
 * 3. A claim whose dispatch fails (the store failed, or this process was fenced) is never heard:
 *    nothing runs, and the call, left executing unclaimed, is claimed by the next process that
 *    takes it over, as after a restart. Unsubscribing (the call left `executing`) stops waiting.
 *
 * @see executionStart, which decides whether a call is claimed, and what a claim supersedes.
 */
export function claimThenRun(view: StreamView<typeof toolCall>, claim: string, supersedes: string | undefined, run$: Observable<ToolCallEvent>): Observable<ToolCallEvent> {
  const event: ToolCallEvent = { type: 'execution_claimed', claim, ...(supersedes === undefined ? {} : { supersedes }) };
  return defer(() => {
    const outcome$ = view.later$.pipe(
      map((rune) => rune.event),
      filter((heard) => heard.type === 'execution_claimed'),
      take(1),
      mergeMap((heard) => (heard.claim === claim ? run$ : EMPTY)),
    );
    return merge(outcome$, of(event));
  });
}
