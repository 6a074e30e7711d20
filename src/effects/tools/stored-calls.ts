import { Observable, defer, from, map, of, retry, timer } from 'rxjs';
import { toolCall } from '../../reducers/tool-call/machine.js';
import type { ToolCallState, ToolCallStateName } from '../../reducers/tool-call/schema.js';
import type { Rune } from '../../reducers/rune.js';
import type { EpicContext } from '../../streams/epic.js';
import type { StreamHead } from '../../streams/store.js';

/** How a failed listing is retried: after this long, doubling, at most `retryMaxMs`. */
const RETRY_BASE_MS = 1000;
const RETRY_MAX_MS = 30_000;

/**
 * The stored tool calls in one of `values` when an effect starts: what it must resume (the Moorex
 * idea: effects follow from state, so a restart re-derives them).
 *
 * 1. Calls heard live (in `calls$`) before the listing reaches them are skipped: this process is
 *    handling them already, and the listing may be older than what it heard.
 * 2. A listing that fails is retried after 1 s, doubling up to 30 s, on the context's scheduler,
 *    inside this observable: the effect's running calls are never torn down by it. Calls emitted
 *    before the failure may come again; what follows must be idempotent (the machine refuses a
 *    second policy decision; a running call is not started twice; a timer is re-armed).
 * 3. Completes after the last one.
 */
export function storedCalls(calls$: Observable<Rune>, context: EpicContext, values: readonly ToolCallStateName[]): Observable<StreamHead> {
  return new Observable<StreamHead>((subscriber) => {
    const heardLive = new Set<string>();
    const live = calls$.subscribe((rune) => heardLive.add(rune.stream));
    const listing = defer(() => context.streams({ machine: toolCall.id, values }))
      .pipe(
        retry({
          delay: (_error: unknown, attempt: number) => timer(Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** (attempt - 1)), context.scheduler),
        }),
      )
      .subscribe({
        next: (head) => {
          if (!heardLive.has(head.stream)) subscriber.next(head);
        },
        complete: () => subscriber.complete(),
      });
    return () => {
      live.unsubscribe();
      listing.unsubscribe();
    };
  });
}

/**
 * A call's state: from memory if it is there (a call heard live is), else hydrated from the store;
 * `undefined` for an unknown stream.
 */
export function callState$(context: EpicContext, stream: string): Observable<ToolCallState | undefined> {
  return defer(() => {
    const state = context.state<ToolCallState>(stream);
    // In memory: synchronously, so the run starts in the same tick as the rune that asked for it.
    if (state !== undefined) return of(state);
    return from(context.snapshot<ToolCallState>(stream)).pipe(map((snapshot) => snapshot?.state));
  });
}
