import { Observable, filter, forkJoin, map, merge, mergeMap, of, take } from 'rxjs';
import { SPAWN_EVENT_TYPE, isRuneOf, type Rune, type RuneOf } from '../../reducers/rune.js';
import { toolCall } from '../../reducers/tool-call/machine.js';
import type { ToolCallInput } from '../../reducers/tool-call/schema.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import type { EpicContext } from '../../streams/epic.js';
import { KeyedListeners } from '../../streams/keyed-listeners.js';
import { agentOfCall } from '../agent/streams.js';
import type { ToolRegistry } from './tool-registry.js';

/**
 * The order in which the calls of one tool round start (seed 003: "Parallel-safe tools run
 * concurrently"). A round is the calls of one `tool_calls_received` of an agent's turn, in the
 * order the model asked for them (the turn's `callIds`).
 */
export interface CallOrder {
  /** Hands it a live rune: a call waiting on that rune's stream hears it. */
  heard(rune: Rune): void;
  /**
   * Emits once, then completes, when the call on `stream` may start: be decided (approval or
   * not), then run.
   *
   * 1. A call of a `parallelSafe` tool starts at once: it never waits.
   * 2. Any other call (an unknown tool is not assumed safe) starts once every call before it in
   *    its round is terminal or of a `parallelSafe` tool: unsafe calls run one at a time, in call
   *    order, and never wait for safe ones.
   * 3. A call outside a round (no agent turn, or the turn is past this round) starts at once.
   *
   * The wait is for terminal states, and approval comes after it: a call awaiting approval holds
   * back the unsafe calls after it until it has run, or is denied or timed out, so two unsafe
   * calls never run at once, whichever approval comes first. A call waits only for earlier calls,
   * each of which ends (approval timeout, execution timeout, cancellation with its turn): no
   * deadlock. Read from the stored states, so it holds again after a restart.
   */
  mayStart$(stream: string, call: Pick<ToolCallInput, 'callId' | 'toolName'>): Observable<void>;
}

const isTerminal = (value: string | undefined): boolean => value !== undefined && toolCall.terminal.includes(value);

/** The order of the calls that the `registry` runs, read through `context`. */
export function callOrder(registry: ToolRegistry, context: EpicContext): CallOrder {
  const waiting = new KeyedListeners<RuneOf<typeof toolCall>>();
  const runesOf$ = (stream: string): Observable<RuneOf<typeof toolCall>> => new Observable((subscriber) => waiting.add(stream, subscriber));

  /** Emits once the earlier call on `stream` no longer holds later ones back: it is safe, or it ended. */
  const released$ = (stream: string): Observable<unknown> =>
    // Live first, then the stored state: a change in between is heard, none is missed.
    merge(
      runesOf$(stream).pipe(filter((rune) => (rune.event.type === SPAWN_EVENT_TYPE ? registry.parallelSafe(rune.event.input.toolName) : isTerminal(rune.to)))),
      context.snapshot(stream, toolCall).pipe(filter((stored) => stored !== undefined && (registry.parallelSafe(stored.state.toolName) || isTerminal(stored.state.value)))),
    ).pipe(take(1));

  return {
    heard(rune) {
      if (waiting.has(rune.stream) && isRuneOf(toolCall, rune)) waiting.next(rune.stream, rune);
    },
    mayStart$(stream, call) {
      const agent = agentOfCall(stream);
      if (registry.parallelSafe(call.toolName) || agent === undefined) return of(undefined);
      return context.snapshot(agent.turn, turnEngine).pipe(
        mergeMap((turn) => {
          const callIds = turn?.state.value === 'tool_executing' ? turn.state.callIds : [];
          const earlier = callIds.slice(0, Math.max(0, callIds.indexOf(call.callId)));
          return earlier.length === 0 ? of(undefined) : forkJoin(earlier.map((callId) => released$(agent.call(callId)))).pipe(map(() => undefined));
        }),
      );
    },
  };
}
