import type { ModelMessage } from 'ai';
import {
  EMPTY,
  Observable,
  catchError,
  concat,
  defer,
  from,
  identity,
  map,
  merge,
  mergeMap,
  of,
  switchMap,
  throwError,
  type MonoTypeOperatorFunction,
  type SchedulerLike,
} from 'rxjs';
import { NO_USAGE, addUsage, pricedResponse, type PriceTable, type Usage } from '../../reducers/budget.js';
import { errorText } from '../../reducers/error-text.js';
import { reactAgentEffectsAt, type ReactAgentEffect } from '../../reducers/react-agent/effects.js';
import type { AgentInput } from '../../reducers/react-agent/input.js';
import type { AgentState, ToolCallRequest } from '../../reducers/react-agent/state.js';
import { applyAgentInput, type AgentInputOutcome } from '../../reducers/react-agent/transition.js';
import type { EpicCommand } from '../../streams/epic.js';
import type { EffectOrigin } from '../../streams/state-effects.js';
import type { ChainOutput, ModelRequest, ToolSpec } from '../llm/model-types.js';
import { FallOverRefusedError } from '../llm/provider-chain.js';
import { INTERRUPTED_BY_RESTART, executionStart } from '../tool-call-recovery.js';
import { checkedClaim, claimThenRun } from '../tools/claim-execution.js';
import { runTool } from '../tools/run-tool.js';
import type { ToolRegistry } from '../tools/tool-registry.js';
import { INTERNAL_TOOL_SPECS, isInternalTool, runInternalTool } from './react-internal-tools.js';

/** The most rounds of internal tool calls one `call-llm` makes before the model must answer without them. */
export const MAX_INTERNAL_ROUNDS = 4;

/** How a ReAct agent's external tool calls are claimed before their tools start (see `claimThenRun`). */
export interface ToolCallClaims {
  /** The claims recorded on the call `toolCallId` (its `tool-call-claimed` runes), as this runner hears them. */
  recorded$(toolCallId: string): Observable<string>;
  /** A new claim id, unique across the processes sharing the log. */
  readonly claimId: () => string;
}

/** What runs a ReAct agent's effects, in memory (`reactAgentRuntime`) or on the engine (`reactAgentEpics`). */
export interface ReactAgentEffectDeps {
  /**
   * The agent's stream: given, what a model call or a tool run makes goes out as a command to it
   * saying so (`by: 'model'` or `'tool'`, its rune's origin), the rest as inputs. Absent: all inputs.
   */
  readonly stream?: string;
  /** One model call: its parts, and any commands of its own (a provider chain's breakers). */
  readonly call: (request: ModelRequest) => Observable<ChainOutput>;
  /** The external tools, by name. */
  readonly registry: ToolRegistry;
  /** The external tools as the model sees them. */
  readonly specs: Readonly<Record<string, ToolSpec>>;
  readonly system?: string;
  /** The clock of the inputs' timestamps and of the tools' timeouts. */
  readonly scheduler: SchedulerLike;
  /** Prices per model id, for the `cost` of each answer's usage (as `agentEpics` takes them). Default: none (no cost). */
  readonly prices?: PriceTable;
  /** The agent's transition with its reason (`applyAgentInput` with the agent's window sizes). */
  readonly apply: (input: AgentInput, state: AgentState) => AgentInputOutcome;
  /**
   * How tool calls are claimed on a durable log (the engine's). Absent (in memory, where nothing
   * outlives the process and one runner runs each call): a tool starts at once, unclaimed.
   */
  readonly claims?: ToolCallClaims;
  /**
   * Why the model may not be asked again within the call answering up to `calledLlmAt` (a further
   * round, after internal tools), heard once the round before is recorded (its
   * `llm-round-answered`): each round is a model call, checked as a loop's next call is. Absent
   * (no budgets, or in memory): every round is asked.
   */
  readonly roundRefusal$?: (calledLlmAt: number) => Observable<string | undefined>;
}

/** What an effect emits: inputs of its agent, and commands elsewhere (breakers). */
export type ReactAgentEffectOutput = AgentInput | EpicCommand;

const parseParameters = (parameters: string): unknown => {
  try {
    return JSON.parse(parameters);
  } catch {
    return parameters;
  }
};

/** The model's view of a ReAct state: the messages of the window and the loop's tool calls, in time order. */
export function reactAgentMessages(state: AgentState): ModelMessage[] {
  const window = state.reActContext?.contextWindowSize ?? state.messages.length;
  const timed: { at: number; messages: ModelMessage[] }[] = state.messages
    .slice(-window)
    .filter((m) => m.content !== '')
    .map((m) => ({ at: m.timestamp, messages: [{ role: m.role, content: m.content } as ModelMessage] }));
  for (const toolCallId of state.reActContext?.toolCallIds ?? []) {
    const call = state.toolCalls[toolCallId];
    if (call === undefined) continue;
    const output =
      call.result === null
        ? { type: 'error-text' as const, value: 'no result yet' }
        : call.result.isSuccess
          ? { type: 'text' as const, value: call.result.content }
          : { type: 'error-text' as const, value: call.result.error };
    timed.push({
      at: call.calledAt,
      messages: [
        { role: 'assistant', content: [{ type: 'tool-call', toolCallId, toolName: call.name, input: parseParameters(call.parameters) }] },
        { role: 'tool', content: [{ type: 'tool-result', toolCallId, toolName: call.name, output }] },
      ],
    });
  }
  return timed.sort((a, b) => a.at - b.at).flatMap((t) => t.messages);
}

/**
 * The id of the assistant message a `call-llm` answering up to `answersTo` streams into, and
 * whether it is still to be started. A message left streaming is a call's that died (a restart,
 * or a call superseded by a newer input): one call runs at a time, so the new call completes it,
 * whatever it answered up to, and no message is left streaming for good. A message already
 * completed (the process died before the observation) leaves the new answer a fresh id.
 */
function messageOf(state: AgentState, answersTo: number): { messageId: string; start: boolean } {
  const streaming = state.messages.find((m) => m.role === 'assistant' && m.streaming);
  if (streaming !== undefined) return { messageId: streaming.id, start: false };
  const base = `llm-${answersTo}`;
  for (let n = 1; ; n++) {
    const messageId = n === 1 ? base : `${base}-${n}`;
    if (!state.messages.some((m) => m.id === messageId)) return { messageId, start: true };
  }
}

/**
 * The inputs that end a loop without asking the model, saying why (`reason`): the message a dead
 * call left streaming is completed with what it had, and the loop completes, answered up to
 * `answersTo`. The way a ReAct agent refuses a model call its conversation or lifecycle forbids.
 */
export function loopEndedUnanswered(state: AgentState, answersTo: number, reason: string, timestamp: number): AgentInput[] {
  return [...streamingCompleted(state, timestamp), { type: 're-act-observed', calledLlmAt: answersTo, observation: { type: 'complete-re-act', reason }, timestamp }];
}

/** The completion of each message a dead call left streaming, with what it had. */
const streamingCompleted = (state: AgentState, timestamp: number): AgentInput[] =>
  state.messages
    .filter((m) => m.role === 'assistant' && m.streaming)
    .map((m): AgentInput => ({ type: 'llm-message-completed', messageId: m.id, content: m.content, timestamp }));

/**
 * The inputs that end a ReAct loop in progress from outside it, saying why (`reason`): each tool
 * call of the loop still in flight fails, `cancelled: <reason>` (its effect is then no longer due,
 * so its tool is stopped), and the model call that would follow is refused as
 * {@link loopEndedUnanswered} refuses one (a message left streaming is completed, the loop
 * completes with the reason; a model call under way is then no longer due, so it is stopped).
 * None for a loop at rest. How a conversation's close ends its ReAct loops (`conversationClose`).
 */
export function loopEnded(state: AgentState, reason: string, timestamp: number): AgentInput[] {
  const inFlight = (state.reActContext?.toolCallIds ?? []).filter((id) => state.toolCalls[id]?.result === null);
  const failed = inFlight.map(
    (toolCallId): AgentInput => ({ type: 'tool-call-completed', toolCallId, result: { isSuccess: false, error: `cancelled: ${reason}`, receivedAt: timestamp }, timestamp }),
  );
  // The state those failures lead to says which model call is due next: the one refused.
  const after = failed.reduce((current, input) => {
    const outcome = applyAgentInput(input, current);
    return outcome.applied ? outcome.state : current;
  }, state);
  const next = Object.values(reactAgentEffectsAt(after)).find((effect) => effect.type === 'call-llm');
  if (next !== undefined) return [...failed, ...loopEndedUnanswered(after, next.answersTo, reason, timestamp)];
  // No model call due (none owed, or the loop is over): only a message left streaming is completed.
  return [...failed, ...streamingCompleted(after, timestamp)];
}

/**
 * One `call-llm`: the model is asked with the window's messages, the loop's tool calls, and the
 * external and internal tools. Internal calls are answered here (dispatching
 * `context-window-expanded` / `history-tool-calls-added` as they say), shown to the model as a
 * round of this call only, and the model is asked again, at most {@link MAX_INTERNAL_ROUNDS}
 * times (the last time without internal tools). The answer is `llm-message-started` at its first
 * text, `llm-message-completed` with the text of every round (none for an answer of tool calls
 * only: it adds no message), and `re-act-observed` with the external calls it asked for
 * (`continue-re-act`) or `complete-re-act`, and the call's `usage` (each answered round a
 * response, `pricedResponse`). A round answered before the model is asked again is recorded as it
 * is answered (`llm-round-answered` with its usage; the observation's `usage` then holds the rounds
 * after it), so a restart mid-call loses none of what the model answered; so is an empty answer
 * the provider chain fell over from (`emptyAnswer`), billed though it said nothing. A failed model
 * call completes the message with what it streamed and ends the loop, then errors (reported as
 * the effect's failure).
 */
function callLlm(answersTo: number, initial: AgentState, deps: ReactAgentEffectDeps): Observable<ReactAgentEffectOutput> {
  return defer(() => {
    const { messageId, start } = messageOf(initial, answersTo);
    // The message starts with the answer's first text (seed 004: a user-visible message), so an
    // answer of tool calls only adds none; one a dead call left streaming is started already.
    let started = !start;
    const now = (): number => deps.scheduler.now();
    let state = initial;
    let text = '';
    // What the answered rounds used, each a response as a turn-based agent's (`pricedResponse`).
    let usage: Usage = NO_USAGE;
    const internalRounds: ModelMessage[] = [];
    const external: Record<string, ToolCallRequest> = {};

    const round = (n: number): Observable<ReactAgentEffectOutput> =>
      defer(() => {
        const offered = n < MAX_INTERNAL_ROUNDS;
        const request: ModelRequest = {
          ...(deps.system === undefined ? {} : { system: deps.system }),
          messages: [...reactAgentMessages(state), ...internalRounds],
          tools: offered ? { ...deps.specs, ...INTERNAL_TOOL_SPECS } : deps.specs,
        };
        const internal: { toolCallId: string; toolName: string; input: unknown }[] = [];
        let asked = 0;
        const answer$ = deps.call(request).pipe(
          mergeMap((output): ReactAgentEffectOutput[] => {
            if (output.type === 'command') return [output.command];
            if (output.type === 'spent') {
              // Billed though it said nothing: recorded at once, so budgets count it while the next provider answers.
              const spent = pricedResponse(deps.prices, output.model, output.usage);
              return [{ type: 'llm-round-answered', calledLlmAt: answersTo, usage: spent, emptyAnswer: true, timestamp: now() }];
            }
            const { part } = output;
            if (part.type === 'text-delta') {
              text += part.text;
              if (started || part.text === '') return [];
              started = true;
              return [{ type: 'llm-message-started', messageId, timestamp: now() }];
            }
            if (part.type === 'tool-call') {
              // An internal name the call did not offer is an external call: it fails, saying so.
              if (offered && isInternalTool(part.toolName)) internal.push(part);
              else {
                external[part.toolCallId] = { name: part.toolName, parameters: JSON.stringify(part.input ?? null), calledAt: now() };
                asked++;
              }
            } else {
              usage = addUsage(usage, pricedResponse(deps.prices, part.model, part.usage, asked));
            }
            return [];
          }),
        );
        const internals$ = defer((): Observable<ReactAgentEffectOutput> => {
          if (internal.length === 0) return EMPTY;
          const inputs: AgentInput[] = [];
          const results = internal.map((call) => {
            const outcome = runInternalTool(call, state, now(), deps.apply);
            state = outcome.state;
            if (outcome.input !== undefined) inputs.push(outcome.input);
            return { ...call, outcome };
          });
          internalRounds.push(
            { role: 'assistant', content: results.map(({ toolCallId, toolName, input }) => ({ type: 'tool-call' as const, toolCallId, toolName, input })) },
            {
              role: 'tool',
              content: results.map(({ toolCallId, toolName, outcome }) => ({
                type: 'tool-result' as const,
                toolCallId,
                toolName,
                output: outcome.isError ? { type: 'error-text' as const, value: outcome.text } : { type: 'text' as const, value: outcome.text },
              })),
            },
          );
          // External calls asked beside them go on as usual: the next call sees the new context.
          if (Object.keys(external).length > 0) return from(inputs);
          // The model is asked again: what it answered so far is recorded first, so a restart
          // before the observation loses none of it (the observation carries the rounds after).
          const answered: AgentInput = { type: 'llm-round-answered', calledLlmAt: answersTo, usage, timestamp: now() };
          usage = NO_USAGE;
          const { roundRefusal$ } = deps;
          if (roundRefusal$ === undefined) return concat(from([...inputs, answered]), round(n + 1));
          // Listening before the round is recorded, so its rune is heard; refused, the call ends there, saying why.
          const next$ = roundRefusal$(answersTo).pipe(switchMap((reason) => (reason === undefined ? round(n + 1) : defer(() => from(end(reason))))));
          return merge(next$, from([...inputs, answered]));
        });
        return concat(answer$, internals$);
      });

    // The call's end: the message completed with its text, and the observation (the loop ends saying why if `refused`).
    let ended = false;
    const end = (refused?: string): AgentInput[] => {
      ended = true;
      return [
        ...(started ? [{ type: 'llm-message-completed' as const, messageId, content: text, timestamp: now() }] : []),
        {
          type: 're-act-observed',
          calledLlmAt: answersTo,
          observation:
            Object.keys(external).length > 0
              ? { type: 'continue-re-act', toolCalls: external }
              : { type: 'complete-re-act', ...(refused === undefined ? {} : { reason: refused }) },
          usage,
          timestamp: now(),
        },
      ];
    };
    return concat(
      round(0),
      defer(() => (ended ? EMPTY : from(end()))),
    ).pipe(
      catchError((error: unknown) => {
        // The loop ends with what was streamed; the failure is reported, and the next message starts a new loop.
        for (const key of Object.keys(external)) delete external[key];
        // A chain that may not fall over from an empty answer (a budget used up) is no failure: the loop ends saying why.
        if (error instanceof FallOverRefusedError) return from(end(error.reason));
        return concat(
          from(end()),
          throwError(() => error),
        );
      }),
    );
  });
}

/**
 * One `call-tool`: the external tool runs (`runTool`: its timeout, abort on cancel) and its
 * outcome is a `tool-call-completed`. A call that cannot run gets a failed result saying why,
 * unclaimed: an unknown tool, bad arguments, an internal tool's name (those run only inside a
 * model call).
 *
 * On a durable log (`deps.claims`) the call is claimed first (`tool-call-claimed`, see
 * `claimThenRun`) and its tool starts only once the claim recorded is this run's. What a runner
 * does with a call in flight is `executionStart`'s rule, from the call's recorded claim in `state`
 * and `origin`: unclaimed, it never started, so it is claimed and run (live, or found after a
 * restart); claimed and heard live, another runner has it; claimed and found after a restart, it
 * started and its run died: claimed again superseding that claim if its tool is `rerunSafe`, else
 * it fails "interrupted by restart".
 */
function callTool(
  effect: Extract<ReactAgentEffect, { type: 'call-tool' }>,
  state: AgentState,
  deps: ReactAgentEffectDeps,
  origin: EffectOrigin,
): Observable<ReactAgentEffectOutput> {
  const { toolCallId } = effect;
  const completed = (result: { isSuccess: true; content: string } | { isSuccess: false; error: string }): AgentInput => {
    const timestamp = deps.scheduler.now();
    return { type: 'tool-call-completed', toolCallId, result: { ...result, receivedAt: timestamp }, timestamp };
  };
  return defer(() => {
    if (isInternalTool(effect.name)) {
      return of(
        completed({ isSuccess: false, error: `tool "${effect.name}" is internal to the agent: it answers inside a model call and is not a tool call of the history` }),
      );
    }
    const call = { toolName: effect.name, arguments: parseParameters(effect.parameters) as never };
    const resolved = deps.registry.resolve(call);
    if (!resolved.ok) return of(completed({ isSuccess: false, error: resolved.error }));
    const run$ = runTool(resolved.tool, resolved.input, deps.scheduler).pipe(
      mergeMap((event): AgentInput[] => {
        switch (event.type) {
          case 'success':
            return [completed({ isSuccess: true, content: typeof event.output === 'string' ? event.output : JSON.stringify(event.output) })];
          case 'execution_error':
            return [completed({ isSuccess: false, error: event.error })];
          case 'execution_timeout':
            return [completed({ isSuccess: false, error: `tool "${effect.name}" timed out` })];
          default:
            return [];
        }
      }),
      catchError((error: unknown) => of(completed({ isSuccess: false, error: errorText(error) }))),
      madeBy(deps.stream, 'tool'),
    );
    const { claims } = deps;
    if (claims === undefined) return run$;
    const start = executionStart(state.toolCalls[toolCallId] ?? {}, origin, deps.registry.rerunSafe(call));
    if (start.action === 'leave') return EMPTY;
    if (start.action === 'interrupt') return of(completed({ isSuccess: false, error: INTERRUPTED_BY_RESTART }));
    const claim = checkedClaim(claims.claimId);
    const claimed: ReactAgentEffectOutput = {
      type: 'tool-call-claimed',
      toolCallId,
      claim,
      ...(start.supersedes === undefined ? {} : { supersedes: start.supersedes }),
      timestamp: deps.scheduler.now(),
    };
    return claimThenRun(claims.recorded$(toolCallId), claim, claimed, run$);
  }).pipe(catchError((error: unknown) => of(completed({ isSuccess: false, error: `the tool runner failed: ${errorText(error)}` }))));
}

/**
 * Runs one effect of `reactAgentEffectsAt` in `state` (the state it became due in). `origin` says
 * whether it was found due after a restart: an LLM call is then simply made again (the model is
 * asked from the durable state, and completes the message it had started); a tool call follows
 * its claim (see `callTool`): run if it never started, else run again only if its tool is `rerunSafe`.
 */
export function runReactAgentEffect(effect: ReactAgentEffect, state: AgentState, deps: ReactAgentEffectDeps, origin: EffectOrigin): Observable<ReactAgentEffectOutput> {
  return effect.type === 'call-llm' ? callLlm(effect.answersTo, state, deps).pipe(madeBy(deps.stream, 'model')) : callTool(effect, state, deps, origin);
}

/** What a model call or a tool run made, as commands to `stream` saying so; commands of its own (its breakers) as they are. */
const madeBy = (stream: string | undefined, by: 'model' | 'tool'): MonoTypeOperatorFunction<ReactAgentEffectOutput> =>
  stream === undefined ? identity : map((out) => ('stream' in out ? out : ({ stream, event: out, by } satisfies EpicCommand)));
