import { z } from 'zod';
import { Observable, catchError, defer, filter, forkJoin, from, map, of, switchMap } from 'rxjs';
import type { ToolCallInput, ToolCallState } from '../../reducers/tool-call/schema.js';
import { toolCall } from '../../reducers/tool-call/machine.js';
import { TURN_PROGRESS, turnEngine } from '../../reducers/turn-engine/machine.js';
import type { ModelCallRequest, TurnEngineEvent } from '../../reducers/turn-engine/schema.js';
import type { Rune } from '../../reducers/rune.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand, EpicContext } from '../../streams/epic.js';
import type { EffectsByKey } from '../../streams/state-effects.js';
import { INTERRUPTED_BY_RESTART } from '../tool-call-recovery.js';
import type { ChainOutput, ModelRequest, SpentCall, ToolSpec } from '../llm/model-types.js';
import { FallOverRefusedError, type ChainContext } from '../llm/provider-chain.js';
import { toSegment } from '../../reducers/stream-ids.js';
import { agentOfTurn } from './streams.js';
import { turnRefusal$ } from './turn-refusal.js';
import { callRefusal$, type BudgetLimits } from './agent-budgets.js';
import { transcriptOf } from './transcript.js';
import { modelCallRecord } from './model-call-record.js';
import { turnRunes$ } from './turn-history.js';
import { assignedTurnId, turnAssigned$ } from './turn-assignment.js';
import { lastStartAt } from './turn-usage.js';
import { errorText } from '../../reducers/error-text.js';
import { costOf, pricedResponse, type PriceTable } from '../../reducers/budget.js';
import { coalesceText } from '../../streams/coalesce-text.js';
import { checkedOption } from '../invalid-option.js';

/** Makes one model call for a request: the model's parts, and any commands of its own (breakers). */
export type ModelCaller = (request: ModelRequest, context: ModelCallContext) => Observable<ChainOutput>;

/** What a {@link ModelCaller} is given: the epic's context, and the turn's say on a provider chain's fall-over (see `ChainContext`). */
export type ModelCallContext = EpicContext & Pick<ChainContext, 'fallOverRefusal'>;

/** Options of {@link agentModel}. */
export interface AgentModelOptions {
  /** The model call: `chainCall$` over a provider chain, usually (see `agentEpics`). */
  readonly call: ModelCaller;
  /** The tools the model may call, as it sees them. Default: none. */
  readonly tools?: Readonly<Record<string, ToolSpec>>;
  /** The system prompt. Default: none. */
  readonly system?: string;
  /** Prices per model id: each response's rune then carries its `cost`. Default: none (no cost). */
  readonly prices?: PriceTable;
}

/** The default of `deltaFlushMs`: a model's text deltas are appended at most once per 50 ms. */
export const DEFAULT_DELTA_FLUSH_MS = 50;

/**
 * How long a model's text deltas are gathered into one `turn.assistant_delta` rune
 * (`deltaFlushMs`): an integer from 0 (a rune per delta) to 10,000 ms. The one schema of the
 * option, `agentEpics({ deltaFlushMs })`'s and the server configuration's.
 */
export const DeltaFlushMs = z.number().int().min(0).max(10_000);

/**
 * The `deltaFlushMs` option checked: its value, or {@link DEFAULT_DELTA_FLUSH_MS}; out of range,
 * an `InvalidOptionError` (code `invalid_option`) naming it.
 */
export const deltaFlushMsOf = (value: unknown, who: string): number =>
  value === undefined ? DEFAULT_DELTA_FLUSH_MS : checkedOption(DeltaFlushMs, 'deltaFlushMs', value, who);

/** How {@link agentModel} appends a model's text. */
export interface AgentModelStreaming {
  /**
   * A response's first text delta is appended at once; after it, at most one
   * `turn.assistant_delta` per `deltaFlushMs` (on the engine's scheduler) carries the text that
   * came meanwhile. Held text is appended before the response's end (`tool_calls_received`,
   * `response_done`, `stream_error`). An integer from 0 (a rune per delta) to 10,000, else an
   * `InvalidOptionError`. Default {@link DEFAULT_DELTA_FLUSH_MS}.
   */
  readonly deltaFlushMs?: number;
  /**
   * Whether a turn that starts has its model called only once `agentTurns` assigned it to its
   * agent (its lifecycle's `turn_assigned`; it interrupts a turn it refuses instead), and then
   * only within the budgets, as after a tool round: no call is made for a turn refused for a
   * budget the conversation's running turns used up, whichever epic hears the start first.
   * `agentEpics` sets it. Default `false`: the model is called at once (`agentModel` alone).
   */
  readonly afterAssignment?: boolean;
}

/** The text of a model's output that is a text delta. */
const deltaText = (output: ChainOutput): string | undefined => (output.type === 'part' && output.part.type === 'text-delta' ? output.part.text : undefined);

/** The model options of one agent, chosen when its turn calls the model (by its role, see `agentEpics`). */
export type AgentModelChooser = (turnStream: string, context: EpicContext) => Observable<AgentModelOptions>;

/**
 * The model request of a turn stream: its whole conversation, from its runes and its calls'
 * states. An Observable all the way: with a context that answers at once (a test's), the model is
 * called in the same frame as the rune that asked for it.
 */
function requestOf(
  stream: string,
  context: EpicContext,
  options: AgentModelOptions,
): Observable<{ request: ModelRequest; record: ModelCallRequest; usedCallIds: Set<string>; startedAt: number | undefined }> {
  const agent = agentOfTurn(stream)!;
  return turnRunes$(stream, context).pipe(
    switchMap((runes) => {
      // A loop, not `flatMap`: the whole conversation is walked every model call, and an array per rune adds up.
      const callIds: string[] = [];
      for (const rune of runes) if (rune.event.type === 'tool_calls_received') callIds.push(...rune.event.callIds);
      const states$ = callIds.length === 0 ? of([]) : forkJoin(callIds.map((callId) => context.snapshot(agent.call(callId), toolCall)));
      return states$.pipe(
        map((snapshots) => {
          const calls = new Map<string, ToolCallState>();
          for (const [i, call] of snapshots.entries()) if (call !== undefined) calls.set(callIds[i]!, call.state);
          const request = { ...(options.system === undefined ? {} : { system: options.system }), messages: transcriptOf(runes, calls), tools: options.tools ?? {} };
          // When the turn started (its last `turn.started`): its wall clock runs from there.
          return { request, record: modelCallRecord(request, runes), usedCallIds: new Set(callIds), startedAt: lastStartAt(runes) };
        }),
      );
    }),
  );
}

/**
 * A call id not used before by this agent, fit for a stream id: each call has its own stream, and
 * some providers number calls per response (`call_0`), which would meet an earlier call's stream.
 */
function uniqueCallId(asked: string, used: Set<string>): string {
  const id = toSegment(asked);
  let unique = id;
  for (let n = 2; used.has(unique); n++) unique = `${id.slice(0, 100)}-${n}`;
  used.add(unique);
  return unique;
}

/**
 * One model response of a turn, as commands to its stream: its text as `assistant_delta`s (the
 * deltas of each `deltaFlushMs` window as one, see {@link AgentModelStreaming});
 * at the end either `tool_calls_received` (with what each call asked for) or `response_done`, each
 * with the response's usage, the model that answered and its cost by the price table; a failed
 * call `stream_error`. An empty answer the chain fell over from is `model_call_spent` at once.
 * Each response also carries the turn's wall clock so far (`wallClockMs`, from its `turn.started`
 * rune, on the engine's scheduler). Commands the call makes of its own (its breakers) pass through.
 */
function respond(stream: string, context: EpicContext, callContext: ModelCallContext, options: AgentModelOptions, deltaFlushMs: number): Observable<EpicCommand> {
  return defer(() => requestOf(stream, context, options)).pipe(
    switchMap(({ request, record, usedCallIds, startedAt }) => {
      const asked: ToolCallInput[] = [];
      let finish: { request: ModelCallRequest; usage?: Record<string, number>; model?: string; provider?: string; cost?: number; wallClockMs?: number } = { request: record };
      // What the model answered: its runes' origin the model call's.
      const toTurn = (event: TurnEngineEvent): EpicCommand => ({ stream, event, by: 'model' });
      // The deltas of each window as one: the end (or a failure) lets the held text pass first.
      const answer$ = options.call(request, callContext).pipe(
        filter((output) => deltaText(output) !== ''),
        coalesceText<ChainOutput>({
          windowMs: deltaFlushMs,
          scheduler: context.scheduler,
          textOf: deltaText,
          joined: (text) => ({ type: 'part', part: { type: 'text-delta', text } }),
        }),
      );
      return new Observable<EpicCommand>((subscriber) =>
        answer$.subscribe({
          next: (output) => {
            if (output.type === 'command') return subscriber.next(output.command);
            if (output.type === 'spent') {
              const cost = costOf(options.prices, output.model, output.usage);
              return subscriber.next(
                toTurn({
                  type: 'model_call_spent',
                  request: record,
                  usage: output.usage,
                  ...(output.model === undefined ? {} : { model: output.model }),
                  ...(cost === undefined ? {} : { cost }),
                }),
              );
            }
            const { part } = output;
            if (part.type === 'text-delta') subscriber.next(toTurn({ type: 'assistant_delta', content: part.text }));
            else if (part.type === 'tool-call') {
              const callId = uniqueCallId(part.toolCallId, usedCallIds);
              asked.push({ callId, toolName: part.toolName, arguments: (part.input ?? null) as ToolCallInput['arguments'] });
            } else {
              const usage =
                part.usage === undefined
                  ? undefined
                  : Object.fromEntries(Object.entries(part.usage).filter((entry): entry is [string, number] => typeof entry[1] === 'number'));
              const cost = costOf(options.prices, part.model, usage);
              finish = {
                request: record,
                ...(usage === undefined ? {} : { usage }),
                ...(part.model === undefined ? {} : { model: part.model }),
                ...(part.provider === undefined ? {} : { provider: part.provider }),
                ...(cost === undefined ? {} : { cost }),
              };
            }
          },
          // A failed call records what it was sent; a budget that refused the chain's fall-over is the outer catch's.
          error: (error: unknown) => {
            if (error instanceof FallOverRefusedError) return subscriber.error(error);
            subscriber.next(toTurn({ type: 'stream_error', error: errorText(error), request: record }));
            subscriber.complete();
          },
          complete: () => {
            // The turn's time so far, on the engine's scheduler: the turn's own `usage.wallClockMs`.
            if (startedAt !== undefined) finish = { ...finish, wallClockMs: Math.max(0, Math.floor(context.scheduler.now() - startedAt)) };
            subscriber.next(
              toTurn(
                asked.length > 0 ? { type: 'tool_calls_received', callIds: asked.map((call) => call.callId), calls: asked, ...finish } : { type: 'response_done', ...finish },
              ),
            );
            subscriber.complete();
          },
        }),
      );
    }),
    // A budget that refused the chain's fall-over ends the turn as a budget's refusal of a call does;
    // a request that could not be built (no call made), with the error.
    catchError((error: unknown) =>
      of<EpicCommand>({
        stream,
        event: error instanceof FallOverRefusedError ? { type: 'interrupt', reason: error.reason } : { type: 'stream_error', error: errorText(error) },
      }),
    ),
  );
}

/**
 * The LLM side of every agent (seed 003 TurnEngine): the model call is an effect of a turn in
 * `streaming` (see `stateEffects`). Whenever an agent's turn enters `streaming` (a `start_turn`,
 * or `tools_finished` after a tool round), the model is called with the whole conversation, and
 * its answer becomes runes of the turn: its text as `turn.assistant_delta`s (the first delta at
 * once, then at most one per `deltaFlushMs`, see {@link AgentModelStreaming}), then
 * `turn.tool_calls_received` or `turn.completed`. When the turn leaves `streaming` otherwise
 * (interrupt, steer), the call is unsubscribed, which aborts its HTTP request; text the window
 * held then is dropped (the interrupt is appended before the call hears of it, and the turn
 * leaves `streaming` with it): the turn keeps the text appended before, a prefix of the model's.
 * A crash likewise loses at most the text of the window it came in.
 *
 * `options` may be a function of the turn stream: the options of that agent (its role's model,
 * tools and system prompt); one that fails ends the turn with `stream_error` naming why.
 *
 * No model call is made while the turn's agent may not run a turn (`turnRefusal`: its
 * conversation suspended, for a budget another turn used up, paused or closing; its agent ended).
 * A turn that enters `streaming` again after a tool round (`tools_finished`) then is interrupted,
 * saying why; one that starts then is interrupted by `agentTurns`, with the same reason. After a
 * tool round, no call either once another would go past a limit of `budgets` (default: none; see
 * `callRefusal$`): the answered calls of the conversation's other running turns count. With
 * `afterAssignment` (as `agentEpics` runs it), a turn that starts is called only once `agentTurns`
 * assigned it, and under the same budget check, so a refused turn never reaches the model.
 *
 * A turn found `streaming` when this process took it over (after a restart) had its call die with
 * the old process: it is interrupted, "interrupted by restart", and the agent is ready again. That
 * call counts as one model call of the turn (`usage` of the `interrupt`): it may have been answered
 * before the process died.
 */
export function agentModel(options: AgentModelOptions | AgentModelChooser, budgets: BudgetLimits = {}, streaming: AgentModelStreaming = {}): Epic {
  const choose: AgentModelChooser = typeof options === 'function' ? options : () => of(options);
  const deltaFlushMs = deltaFlushMsOf(streaming.deltaFlushMs, 'agentModel');
  if (streaming.afterAssignment !== true) return modelCalls(choose, budgets, deltaFlushMs, undefined);
  return function agentModel(runes$, context, deps) {
    return modelCalls(choose, budgets, deltaFlushMs, runes$)(runes$, context, deps);
  };
}

/** {@link agentModel}'s effects; with `runes$`, a turn that starts waits for its assignment (`afterAssignment`). */
function modelCalls(choose: AgentModelChooser, budgets: BudgetLimits, deltaFlushMs: number, runes$: Observable<Rune> | undefined): Epic {
  return stateEffects({
    name: 'agentModel',
    machine: turnEngine,
    states: ['streaming'],
    unchangedBy: TURN_PROGRESS,
    effects: (view, context): EffectsByKey<typeof turnEngine> => {
      const agent = agentOfTurn(view.stream);
      if (agent === undefined) return {};
      // Its call counts as one model call: the provider may have answered it before the process
      // died (and the log cannot tell), so the conversation's budget does not lose it.
      if (view.origin === 'resumed') return { interrupted: of({ type: 'interrupt', reason: INTERRUPTED_BY_RESTART, usage: { modelCalls: 1 } }) };
      // A chain falling over from an empty answer makes another billed call: only if the turn may call the model.
      const callContext = (prices: PriceTable | undefined): ModelCallContext =>
        Object.assign(Object.create(context) as EpicContext, {
          fallOverRefusal: (spent: SpentCall) => {
            // The empty answer's `model_call_spent` is taken already; counted (priced) if it is not durable yet.
            const seq = context.unpublishedSeq?.(view.stream);
            const pending = seq === undefined ? undefined : { usage: pricedResponse(prices, spent.model, spent.usage), seq };
            return turnRefusal$(agent, context).pipe(switchMap((reason) => (reason === undefined ? callRefusal$(agent, context, budgets, pending) : of(reason))));
          },
        });
      const model$ = choose(view.stream, context).pipe(
        switchMap((chosen) => respond(view.stream, context, callContext(chosen.prices), chosen, deltaFlushMs)),
        catchError((error: unknown) => of<EpicCommand>({ stream: view.stream, event: { type: 'stream_error', error: errorText(error) } })),
      );
      // No model call while the agent may not run a turn. A turn going on after its tool round
      // (its conversation suspended meanwhile, by another agent's turn using the budget up) is
      // interrupted here, saying why; one just started is `agentTurns`' to interrupt, with the same reason.
      // After a round, the budgets too: another call must not go past a limit the conversation's
      // other running turns (their answered calls not in its usage yet) or this turn reached meanwhile.
      // A turn that starts, with `afterAssignment`: once assigned, the call is this effect's to refuse, as after a round.
      const assigning = runes$ !== undefined && view.rune?.event.type === 'start_turn';
      const owned = assigning || view.rune?.event.type === 'tools_finished';
      const refused = (reason: string): EpicCommand[] => (owned ? [{ stream: view.stream, event: { type: 'interrupt', reason } }] : []);
      const refusal$ = owned
        ? turnRefusal$(agent, context).pipe(switchMap((reason) => (reason === undefined ? callRefusal$(agent, context, budgets) : of(reason))))
        : turnRefusal$(agent, context);
      const decided$ = assigning
        ? context.snapshot(view.stream, turnEngine).pipe(switchMap((turn) => turnAssigned$(agent, assignedTurnId(turn?.state, view.seq), runes$, context)))
        : of(undefined);
      return {
        model: decided$.pipe(
          switchMap(() => refusal$),
          switchMap((reason) => (reason === undefined ? model$ : from(refused(reason)))),
        ),
      };
    },
  });
}
