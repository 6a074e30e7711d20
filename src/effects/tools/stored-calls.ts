import { Observable, defer, map, of } from 'rxjs';
import { storedHeads } from '../stored-heads.js';
import { toolCall } from '../../reducers/tool-call/machine.js';
import type { ToolCallState, ToolCallStateName } from '../../reducers/tool-call/schema.js';
import type { Rune } from '../../reducers/rune.js';
import type { EpicContext } from '../../streams/epic.js';
import type { StreamHead } from '../../streams/store.js';

/** The stored tool calls in one of `values` when an effect starts, less those heard live (see {@link storedHeads}). */
export function storedCalls(calls$: Observable<Rune>, context: EpicContext, values: readonly ToolCallStateName[]): Observable<StreamHead> {
  return storedHeads(calls$, context, { machine: toolCall.id, values });
}

/**
 * A call's state: from memory if it is there (a call heard live is), else hydrated from the store;
 * `undefined` for an unknown stream.
 */
export function callState$(context: EpicContext, stream: string): Observable<ToolCallState | undefined> {
  return defer(() => {
    const state = context.state(stream, toolCall);
    // In memory: synchronously, so the run starts in the same tick as the rune that asked for it.
    if (state !== undefined) return of(state);
    return context.snapshot(stream, toolCall).pipe(map((snapshot) => snapshot?.state));
  });
}
