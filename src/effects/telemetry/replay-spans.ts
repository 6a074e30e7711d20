import type { Tracer } from '@opentelemetry/api';
import { Observable, filter, ignoreElements, of, reduce, switchMap, takeWhile, tap } from 'rxjs';
import type { Rune } from '../../reducers/rune.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import type { EpicContext } from '../../streams/epic.js';
import { RuneSpans } from './rune-spans.js';

/**
 * The spans of a run whose end this process saw but whose start it did not (it started before a
 * restart or a takeover), rebuilt from the log: the run's runes, from its start (a turn's last
 * `turn.started` before `end`, a tool call's spawn) to `end`, taken by a `RuneSpans` of their own,
 * so every span gets its runes' times and is marked `runestream.span.replayed`. Two reads of the
 * stream (one to find the start, one from it), so a long stream is never held in memory.
 */
export function replaySpans$(end: Rune, context: EpicContext, tracer: Pick<Tracer, 'startSpan'>, captureContent: boolean): Observable<never> {
  const upToEnd = takeWhile((rune: Rune) => rune.seq <= end.seq);
  const startSeq$ =
    end.machine === turnEngine.id
      ? context.read(end.stream).pipe(
          upToEnd,
          filter((rune) => rune.kind === 'turn.started'),
          reduce((_, rune) => rune.seq, 0),
        )
      : of(1);
  return startSeq$.pipe(
    switchMap((startSeq) => {
      const spans = new RuneSpans(tracer, { captureContent, maxOpenSpans: 1, replayed: true });
      return startSeq === 0
        ? []
        : context.read(end.stream, startSeq - 1).pipe(
            upToEnd,
            tap((rune) => spans.take(rune)),
          );
    }),
    ignoreElements(),
  );
}
