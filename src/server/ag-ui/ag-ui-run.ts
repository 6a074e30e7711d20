import type { AGUIEvent } from '@ag-ui/core';
import { concat, concatMap, defer, EMPTY, from, last, map, merge, type Observable, of, reduce, takeWhile } from 'rxjs';
import { foldRune } from '../../reducers/fold.js';
import type { Rune } from '../../reducers/rune.js';
import type { AgentStreams } from '../../reducers/stream-ids.js';
import type { ToolCallState } from '../../reducers/tool-call/schema.js';
import type { TurnEngineState } from '../../reducers/turn-engine/schema.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import type { Engine } from '../../streams/engine.js';
import { callRuneEvents, finishRun, interruptRun, roundStatus, startRun, turnRuneEvents, type AgUiRun, type AgUiStep } from './ag-ui-events.js';

/** A call of the round a run starts in, as it stood when the run started: its runes after `seq` are followed. */
export interface AgUiRunCall {
  readonly seq: number;
  readonly state: ToolCallState;
}

/** Where a run starts: the agent's turn stream at a seq, and (for a run that resumes a tool round) the round's calls. */
export interface AgUiRunStart {
  readonly engine: Engine;
  readonly agent: AgentStreams;
  readonly threadId: string;
  readonly runId: string;
  /** The turn stream's seq and state the run follows on from: its runes after `seq` are the run's. */
  readonly seq: number;
  readonly state: TurnEngineState;
  /**
   * Set for a resume: the calls of the round in progress at `seq`, each followed after its own
   * seq (read before the answers were dispatched, so the answers are among the runes followed).
   */
  readonly calls?: readonly AgUiRunCall[];
}

/** A batch of events, and whether it ends the run. */
interface Batch {
  readonly events: readonly AGUIEvent[];
  readonly done: boolean;
}

/**
 * One AG-UI run of an agent, read from the log: `RUN_STARTED` and `STATE_SNAPSHOT`, then the
 * events of each rune of its turn stream after `seq` (see {@link turnRuneEvents}). When the turn
 * asks for tools, the turn's later runes wait (`concatMap`) while the round's call streams are
 * followed, merged (see {@link callRuneEvents}): until every call ended, and the turn goes on;
 * or until a call awaits approval and nothing else can move, and the run ends with an interrupt
 * (see {@link roundStatus}). It completes after its `RUN_FINISHED` or `RUN_ERROR`; unsubscribing
 * (a client gone) stops only the reading: the turn goes on in the log.
 *
 * A run that starts in a tool round (`calls`) follows that round first; one that starts with the
 * turn idle and nothing to follow (a resume that found the turn done) finishes at once.
 */
export function agUiRun$(start: AgUiRunStart): Observable<AGUIEvent> {
  return defer(() => {
    const { engine, agent } = start;
    const opened = startRun(
      start.threadId,
      start.runId,
      start.state,
      (start.calls ?? []).map((call) => call.state),
    );
    // What the client was told so far: each batch of events moves it on (the run is read in order, one rune at a time).
    let run: AgUiRun = opened.run;
    const apply = (step: AgUiStep): Batch => {
      run = step.run;
      return { events: step.events, done: run.done };
    };

    /** The round of `callIds`: each call's runes after `after[callId]`, until the round is done or interrupted. */
    const round$ = (callIds: readonly string[], after: Readonly<Record<string, number>>): Observable<Batch> => {
      const settled = (): Batch | undefined => {
        const status = roundStatus(run.state, callIds);
        if (status.type === 'interrupt') return apply(interruptRun(run, status.interrupts));
        return status.type === 'done' ? { events: [], done: false } : undefined;
      };
      // Only a round found done is settled before its runes: a resumed round's answers are runes yet to come.
      if (roundStatus(run.state, callIds).type === 'done') return of({ events: [], done: false });
      return merge(...callIds.map((callId) => engine.runes$(agent.call(callId), { afterSeq: after[callId] ?? 0 }))).pipe(
        map((rune): Batch & { settled: boolean } => {
          const batch = apply(callRuneEvents(run, rune));
          const end = settled();
          return end === undefined ? { ...batch, settled: false } : { events: [...batch.events, ...end.events], done: end.done, settled: true };
        }),
        takeWhile((batch) => !batch.settled, true),
      );
    };

    const onTurnRune = (rune: Rune): Observable<Batch> => {
      const batch = apply(turnRuneEvents(run, rune));
      if (rune.event.type !== 'tool_calls_received' || batch.done) return of(batch);
      return concat(of(batch), round$(run.turn.callIds, {}));
    };

    // A resume: the round it answered first, or, the turn idle already, nothing left to follow.
    const resume = start.calls;
    const first$ =
      resume !== undefined && start.state.value === 'tool_executing'
        ? round$(start.state.callIds, Object.fromEntries(resume.map((call) => [call.state.callId, call.seq])))
        : EMPTY;
    const turn$ =
      resume !== undefined && start.state.value === 'idle'
        ? defer(() => of(apply(finishRun(run))))
        : engine.runes$(agent.turn, { afterSeq: start.seq }).pipe(concatMap(onTurnRune));
    const body$ = concat(
      first$,
      defer(() => (run.done ? EMPTY : turn$)),
    ).pipe(takeWhile((batch) => !batch.done, true));
    return concat(of<Batch>({ events: opened.events, done: false }), body$).pipe(concatMap((batch) => from(batch.events)));
  });
}

/**
 * The start of the agent's latest turn, to replay its run (a rejoin): the seq before its
 * `turn.started` rune and the state there, folded from the turn stream's runes up to `headSeq`;
 * `undefined` when the stream has no turn.
 */
export function latestTurnStart(engine: Engine, turnStream: string, headSeq: number): Observable<{ seq: number; state: TurnEngineState } | undefined> {
  type Fold = { state: unknown; start?: { seq: number; state: TurnEngineState } };
  return engine.runes$(turnStream, { afterSeq: 0 }).pipe(
    takeWhile((rune) => rune.seq < headSeq, true),
    reduce<Rune, Fold>(
      (fold, rune) => ({
        state: foldRune(turnEngine, fold.state, rune.seq, rune.event),
        start: rune.event.type === 'start_turn' ? { seq: rune.seq - 1, state: fold.state as TurnEngineState } : fold.start,
      }),
      { state: undefined },
    ),
    map((fold) => fold.start),
    last(),
  );
}
