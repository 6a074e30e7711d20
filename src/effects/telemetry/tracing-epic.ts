import { trace, type Tracer } from '@opentelemetry/api';
import { EMPTY, Subject, catchError, defer, finalize, ignoreElements, merge, mergeMap, tap } from 'rxjs';
import type { Rune } from '../../reducers/rune.js';
import type { Epic } from '../../streams/epic.js';
import { guardedTracer } from './guarded-tracer.js';
import { replaySpans$ } from './replay-spans.js';
import { RuneSpans } from './rune-spans.js';

/** The name of the tracer {@link tracingEpic} gets from the global provider when given none. */
export const TRACER_NAME = 'runestream';

/** Options of {@link tracingEpic}, each with its default. */
export interface TracingOptions {
  /**
   * Where spans go. Default: `trace.getTracer('runestream')` of `@opentelemetry/api`'s global
   * provider, a no-op until the application registers an SDK (e.g. `NodeSDK.start()` or
   * `trace.setGlobalTracerProvider(provider)`, before or after the engine starts).
   */
  readonly tracer?: Tracer;
  /**
   * Whether message content is recorded, as the GenAI conventions' opt-in attributes: the turn's
   * input and answer (`gen_ai.input.messages`, `gen_ai.output.messages`), each model response
   * (`gen_ai.output.messages`), tool arguments and results (`gen_ai.tool.call.arguments`,
   * `gen_ai.tool.call.result`). Default false: spans then carry names, models, tokens and
   * outcomes, never what was said.
   */
  readonly captureContent?: boolean;
  /**
   * Turns and tool calls with a span open at once (each holds its spans and, with
   * `captureContent`, the current response's text so far). Past it, the oldest open
   * span is ended, marked `runestream.span.cut_short: evicted`, so a run whose end this process
   * never sees cannot hold memory forever. Default 10,000.
   */
  readonly maxOpenSpans?: number;
}

const EPIC = 'tracing';
/** Runs whose spans are rebuilt from the log at once (each reads its stream); the others wait their turn. */
const MAX_REPLAYS = 4;

/**
 * OpenTelemetry spans of every agent turn, model call and tool call, derived from the live runes
 * (see `RuneSpans` for the mapping): `invoke_agent {agent}` with a `chat {model}` child per model
 * call and an `execute_tool {tool}` child per tool call, the GenAI semantic conventions'
 * `gen_ai.*` attributes, approvals and the tool round's dispatch as span events, and a failed
 * model call marked ERROR with `error.type`. It emits no command; only `@opentelemetry/api` is
 * used, so without an SDK it costs one no-op span per run.
 *
 * 1. Only live runes of the streams this process runs effects for are seen (with a shared
 *    PostgreSQL log, each turn is traced by the process that calls its model).
 * 2. A tracer, span processor or exporter that throws never stops the engine, the epic or the
 *    turn: the failure is reported on the engine's `errors$` (`effect_failed`, epic `tracing`)
 *    and the next rune is traced as usual.
 * 3. When the engine closes, spans still open are ended, marked `runestream.span.cut_short: unfinished`.
 * 4. A run whose end is seen here but whose start is not (it started before a restart) has its
 *    spans rebuilt from the log (see `replaySpans$`), marked `runestream.span.replayed`.
 *
 * ## Example
 * ```ts
 * import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
 * import { filter, firstValueFrom } from 'rxjs';
 * import { agentStreams, createEngine, type TurnEngineState } from 'runestream';
 * import { agentEpics, scriptedModel, tracingEpic } from 'runestream/agents';
 * const exporter = new InMemorySpanExporter();
 * const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('app');
 * const engine = createEngine({ epics: [...agentEpics({ model: scriptedModel([{ text: 'Hi there' }]) }), tracingEpic({ tracer })] });
 * const { turn } = agentStreams('conv/demo', 'helper');
 * await engine.spawn(turn, 'turn-engine');
 * await engine.dispatch(turn, { type: 'start_turn', input: 'Hello' });
 * await firstValueFrom(engine.state$<TurnEngineState>(turn).pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
 * console.log(exporter.getFinishedSpans().map((span) => span.name)); // Logs: [ 'chat scripted-model', 'invoke_agent helper' ]
 * await engine.close();
 * ```
 */
export function tracingEpic(options: TracingOptions = {}): Epic {
  const { tracer, captureContent = false, maxOpenSpans = 10_000 } = options;
  if (typeof captureContent !== 'boolean') throw new TypeError(`tracingEpic: "captureContent" must be a boolean, got ${String(captureContent)}`);
  if (!Number.isSafeInteger(maxOpenSpans) || maxOpenSpans < 1) throw new TypeError(`tracingEpic: "maxOpenSpans" must be a positive integer, got ${String(maxOpenSpans)}`);
  if (tracer !== undefined && typeof tracer.startSpan !== 'function') throw new TypeError('tracingEpic: "tracer" must be an OpenTelemetry Tracer (with startSpan)');

  const epic: Epic = (runes$, context) =>
    defer(() => {
      /** The stream of the rune being traced: whose span a failure was in. */
      let current = '';
      const failed = (stream: string, error: unknown): void => context.report?.({ type: 'effect_failed', epic: EPIC, stream, key: 'span', error });
      const base = tracer ?? trace.getTracer(TRACER_NAME);
      const spans = new RuneSpans(
        guardedTracer(base, (error) => failed(current, error)),
        { captureContent, maxOpenSpans },
      );
      /** Ends of runs that started before this process saw them: their spans are rebuilt from the log. */
      const unseen$ = new Subject<Rune>();
      const replayed$ = unseen$.pipe(
        mergeMap(
          (end) =>
            replaySpans$(
              end,
              context,
              guardedTracer(base, (error) => failed(end.stream, error)),
              captureContent,
            ).pipe(
              catchError((error: unknown) => {
                failed(end.stream, error);
                return EMPTY;
              }),
            ),
          MAX_REPLAYS,
        ),
      );
      const traced$ = runes$.pipe(
        tap((rune: Rune) => {
          current = rune.stream;
          try {
            const unseen = spans.endsUnseenRun(rune);
            spans.take(rune);
            if (unseen) unseen$.next(rune);
          } catch (error) {
            failed(rune.stream, error);
          }
        }),
        finalize(() => unseen$.complete()),
      );
      return merge(replayed$, traced$).pipe(
        ignoreElements(),
        finalize(() => spans.endAll(context.scheduler.now(), failed)),
      );
    });
  Object.defineProperty(epic, 'name', { value: EPIC });
  return epic;
}
