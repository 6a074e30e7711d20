import type { LanguageModel } from 'ai';
import { EMPTY, defer, filter, first, forkJoin, from, map, merge, of, switchMap, type Observable } from 'rxjs';
import { agentLifecycle } from '../../reducers/agent-lifecycle/machine.js';
import { conversation } from '../../reducers/conversation/machine.js';
import { NO_USAGE, pricedResponse, type PriceTable, type Usage } from '../../reducers/budget.js';
import type { AgentState } from '../../reducers/react-agent/state.js';
import type { Rune } from '../../reducers/rune.js';
import { reactAgentEffectsAt, type ReactAgentEffect } from '../../reducers/react-agent/effects.js';
import { reactAgent } from '../../reducers/react-agent/machine.js';
import { agentStreams, parseStreamId, type AgentStreams } from '../../reducers/stream-ids.js';
import { applyAgentInput } from '../../reducers/react-agent/transition.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicContext } from '../../streams/epic.js';
import type { EffectOrigin, EffectsByKey, StreamView } from '../../streams/state-effects.js';
import type { AgentInput } from '../../reducers/react-agent/input.js';
import { randomClaimId } from '../tools/claim-execution.js';
import { providerBreakers } from '../llm/provider-breakers.js';
import type { SpentCall } from '../llm/model-types.js';
import { chainCall$, type ProviderChain } from '../llm/provider-chain.js';
import type { AnyTool } from '../tools/tool.js';
import { toolRegistry } from '../tools/tool-registry.js';
import { toolSpecs } from '../tools/tool-specs.js';
import { chainOf } from './agent-roles.js';
import type { ModelCallContext, ModelCaller } from './agent-model.js';
import type { BudgetLimits } from './agent-budgets.js';
import type { AgentAdmission } from './agent-companions.js';
import { reactAgentLifecycle } from './react-agent-lifecycle.js';
import { stateOf } from './state-of.js';
import { agentOfReact } from './streams.js';
import { loopEndedUnanswered, runReactAgentEffect, type ReactAgentEffectDeps, type ReactAgentEffectOutput, type ToolCallClaims } from './react-agent-effects.js';
import { turnRefusal$, turnStartRefusal$ } from './turn-refusal.js';
import { checkNoInternalNames } from './react-internal-tools.js';

/** Options of {@link reactAgentEpics}. */
export interface ReactAgentEpicsOptions {
  /** One model (a chain of one provider, named `"model"`), or a provider chain with fallback: as `agentEpics` takes it. */
  readonly model: LanguageModel | ProviderChain;
  /** The external tools every ReAct agent may call. Default: none. Their names must not be an internal tool's. */
  readonly tools?: readonly AnyTool[];
  /** The system prompt of every ReAct agent. Default: none. */
  readonly system?: string;
  /**
   * Whether to include `providerBreakers(chain)`, the clock of the chain's OPEN breakers. Default
   * true; pass false beside `agentEpics` on the same providers, which includes it already.
   */
  readonly breakers?: boolean;
  /**
   * Whether an agent of a role may start now, as `agentEpics({ admission })` takes it (the agent
   * registry's `registeredAgentAdmission`): one it refuses gets `init_error` saying why, and its
   * loop never calls the model or a tool. Default: none (every agent starts).
   */
  readonly admission?: AgentAdmission;
  /**
   * A new claim id for each run of a tool call, recorded by its `tool-call-claimed` before the
   * tool starts: unique across every process sharing the log, 1 to 128 characters. Default: a random UUID.
   */
  readonly claimId?: () => string;
  /**
   * Prices per model id, for the `cost` in each answer's usage and the `cost` dimension of
   * budgets, as `agentEpics({ prices })` takes them. Default: none (no cost).
   */
  readonly prices?: PriceTable;
  /**
   * The budgets `agentEpics` enforces (its `budget`, `budgetsByRole` and `conversationBudget`):
   * pass the same, so no model call of a ReAct loop starts once its agent's or conversation's
   * budget is used up, even before the conversation's suspension lands. Default: none (only a
   * suspended conversation stops a loop).
   */
  readonly budgets?: BudgetLimits;
}

/**
 * Every epic an engine needs to run seed 004's ReAct agents, on the same models and tools as the
 * turn-based agent (`agentEpics`). A stream `<root>/agent/<a>/react` of machine `react-agent` (see
 * `agentStreams`) is an agent: send it `user-message-received` and its effects follow from its state.
 *
 * 1. The effects are `reactAgentEffectsAt(state)`, kept reconciled by the engine (`stateEffects`,
 *    every state, keyed `call-llm:<calledLlmAt>` and `call-tool:<id>`): the model is called through
 *    the provider chain (`chainCall$`, its breakers recorded) and tools run with `runTool`.
 * 2. The model is offered seed 004's internal tools besides the external ones:
 *    `load_older_messages` (`context-window-expanded`), `query_tool_calls` (answered from the
 *    state) and `load_tool_call_results` (`history-tool-calls-added`). They are answered inside
 *    the model call, which asks the model again; they never enter `toolCalls`. A call to an
 *    unknown tool, or to an internal one outside that offer, ends with a failed result naming it.
 * 3. Each agent has the seed-003 companions of a turn-based agent (`reactAgentLifecycle`): its
 *    lifecycle stream and, if it is the first agent there, its conversation; each ReAct loop is
 *    a turn of the lifecycle and of the conversation.
 * 4. An external tool call is claimed durably before its tool starts (`tool-call-claimed`, a
 *    `tool.claimed` rune), and the tool starts only if that claim is the one recorded: of two
 *    runners (two processes in a failover), one starts it.
 * 5. After a restart the engine lists every stored ReAct stream, hydrates it and resumes what its
 *    state still needs: an LLM call that was in flight is made again from the durable state (it
 *    completes the message it had started); a tool call in flight that was never claimed never
 *    started, so it is claimed and runs; a claimed one started and died with its process: it runs
 *    again under a new claim if its tool is `rerunSafe`, else it fails "interrupted by restart"
 *    and the model hears so (see `executionStart`).
 *
 * ## Example
 * ```ts
 * import { filter, firstValueFrom } from 'rxjs';
 * import { createEngine, type AgentState } from 'runestream';
 * import { reactAgentEpics, scriptedModel } from 'runestream/agents';
 *
 * const engine = createEngine({ epics: reactAgentEpics({ model: scriptedModel([{ text: 'Hello!' }]) }) });
 * const stream = 'conv/c1/agent/a1/react';
 * await engine.spawn(stream, 'react-agent');
 * const answered = firstValueFrom(engine.state$<AgentState>(stream).pipe(filter((s) => s.reActContext === null && s.messages.length === 2)));
 * await engine.dispatch(stream, { type: 'user-message-received', messageId: 'm1', content: 'Hi', timestamp: Date.now() });
 * console.log((await answered).messages[1]?.content);
 * // Logs: Hello!
 * await engine.close();
 * ```
 */
export function reactAgentEpics(options: ReactAgentEpicsOptions): Epic[] {
  const { model, tools = [], system, breakers = true, admission, claimId, prices, budgets } = options;
  const chain = chainOf(model);
  const loop = reactAgentLoop({
    call: (request, context) => chainCall$(chain, request, context),
    tools,
    ...(system === undefined ? {} : { system }),
    ...(prices === undefined ? {} : { prices }),
    ...(admission === undefined ? {} : { gated: true }),
    ...(claimId === undefined ? {} : { claimId }),
    ...(budgets === undefined ? {} : { budgets }),
  });
  const lifecycle = reactAgentLifecycle(admission, budgets);
  return breakers ? [loop, lifecycle, providerBreakers(chain)] : [loop, lifecycle];
}

/** Options of {@link reactAgentLoop}. */
export interface ReactAgentLoopOptions {
  /** The model call: `chainCall$` over a provider chain, usually. */
  readonly call: ModelCaller;
  readonly tools: readonly AnyTool[];
  readonly system?: string;
  /** Whether an agent's effects wait for its lifecycle to start, and never run if it failed (refused by admission) or ended. Default false. */
  readonly gated?: boolean;
  /** A new claim id for each run of a tool call. Default: a random UUID. */
  readonly claimId?: () => string;
  /** Prices per model id, for the `cost` of each answer's usage. Default: none (no cost). */
  readonly prices?: PriceTable;
  /** The budgets that refuse a model call once used up (see `reactAgentEpics`). Default: none. */
  readonly budgets?: BudgetLimits;
}

/** The claims recorded on each tool call of a ReAct stream, heard on its later runes. */
const claimsOn = (view: StreamView<typeof reactAgent>, claimId: () => string): ToolCallClaims => ({
  recorded$: (toolCallId) =>
    view.later$.pipe(
      map((rune) => rune.event),
      filter((event): event is Extract<AgentInput, { type: 'tool-call-claimed' }> => event.type === 'tool-call-claimed' && event.toolCallId === toolCallId),
      map((event) => event.claim),
    ),
  claimId,
});

/**
 * How this process came to an effect. The effect host takes every live rune of a data-state
 * machine for `live`, but a tool call is this process's own only when the rune it heard issued it
 * (`re-act-observed` naming it): a call first found in flight under any other rune (a user message
 * heard before the listing at start reached the agent) was in flight before this process took the
 * agent over, so it is `resumed`, and `executionStart` decides from its claim.
 */
function originOf(view: StreamView<typeof reactAgent>, effect: ReactAgentEffect): EffectOrigin {
  if (effect.type !== 'call-tool' || view.origin === 'resumed') return view.origin;
  const event = view.rune?.event;
  const issued = event?.type === 're-act-observed' && event.observation.type === 'continue-re-act' && Object.hasOwn(event.observation.toolCalls, effect.toolCallId);
  return issued ? 'live' : 'resumed';
}

/**
 * Whether the agent of a ReAct stream has started: its lifecycle's first state past `spawning`
 * (live runes first, then the stored state), true unless it is terminal (failed to start, or ended).
 */
function started$(stream: string, runes$: Observable<Rune>, context: EpicContext): Observable<boolean> {
  const parts = parseStreamId(stream);
  if (parts?.kind !== 'react') return of(true);
  const lifecycle = agentStreams(parts.root, parts.agentId).lifecycle;
  return merge(
    runes$.pipe(
      filter((rune) => rune.stream === lifecycle),
      map((rune) => rune.to),
    ),
    defer(() => stateOf(context, lifecycle, agentLifecycle)).pipe(map((state) => state?.value)),
  ).pipe(
    first((value) => value !== undefined && value !== 'spawning'),
    map((value) => !(agentLifecycle.terminal as readonly (string | undefined)[]).includes(value)),
  );
}

/**
 * A model call of the ReAct stream `stream`, unless its agent may not run a turn now (see
 * `turnStartRefusal$`: its conversation suspended for budget, paused or closing; the agent ended;
 * with `limits`, its agent's or conversation's budget used up, even before the suspension lands): then
 * the loop ends unanswered, saying why, and the model is not called. Decided from the durable
 * states each time a call is due, so every call of a loop is checked, as each turn of a
 * turn-based agent is; with `limits`, so is each further round of a call ({@link roundRefusalOf}).
 */
function unlessRefused(
  stream: string,
  state: AgentState,
  answersTo: number,
  context: EpicContext,
  call$: Observable<ReactAgentEffectOutput>,
  limits: BudgetLimits | undefined,
): Observable<ReactAgentEffectOutput> {
  const agent = agentOfReact(stream);
  if (agent === undefined) return call$;
  return callRefusal$(agent, context, limits).pipe(
    switchMap((reason) => (reason === undefined ? call$ : from(loopEndedUnanswered(state, answersTo, reason, context.scheduler.now())))),
  );
}

/**
 * Why `agent` may not call the model now (see {@link unlessRefused}), from the durable states, with
 * `pending` counted (see `turnStartRefusal$`): an Observable of one value.
 */
function callRefusal$(agent: AgentStreams, context: EpicContext, limits: BudgetLimits | undefined, pending: Usage = NO_USAGE): Observable<string | undefined> {
  if (limits === undefined) return turnRefusal$(agent, context);
  return forkJoin([context.snapshot(agent.root, conversation), context.snapshot(agent.lifecycle, agentLifecycle)]).pipe(
    switchMap(([talk, lifecycle]) => turnStartRefusal$(agent, talk?.state, lifecycle?.state, context, limits, pending)),
  );
}

/**
 * Why a chain may not fall over from an empty answer to another (billed) call of `agent`'s loop:
 * {@link callRefusal$}, the empty answer counted. Its `llm-round-answered` is applied when the
 * chain asks; while the stream has runes not durable yet, the log does not count it, so it is
 * added here.
 */
function fallOverRefusal$(
  agent: AgentStreams,
  context: EpicContext,
  limits: BudgetLimits | undefined,
  prices: PriceTable | undefined,
  spent: SpentCall,
): Observable<string | undefined> {
  const counted = context.unpublishedSeq?.(agent.react) === undefined;
  return callRefusal$(agent, context, limits, counted ? NO_USAGE : pricedResponse(prices, spent.model, spent.usage));
}

/**
 * With budgets, why the model may not be asked a further round of the call answering up to
 * `calledLlmAt` (see `ReactAgentEffectDeps.roundRefusal$`): once the round before is heard
 * recorded on the stream (so the conversation's usage counts it), {@link callRefusal$}.
 */
function roundRefusalOf(view: StreamView<typeof reactAgent>, context: EpicContext, limits: BudgetLimits | undefined) {
  const agent = agentOfReact(view.stream);
  if (agent === undefined || limits === undefined) return undefined;
  return (calledLlmAt: number): Observable<string | undefined> =>
    view.later$.pipe(
      first((rune) => rune.event.type === 'llm-round-answered' && rune.event.calledLlmAt === calledLlmAt && rune.event.emptyAnswer !== true),
      switchMap(() => callRefusal$(agent, context, limits)),
    );
}

/** The effects of every ReAct stream, reconciled by the engine (see {@link reactAgentEpics}). */
export function reactAgentLoop(options: ReactAgentLoopOptions): Epic {
  const { call, tools, system, gated = false, claimId = randomClaimId, prices, budgets } = options;
  if (typeof claimId !== 'function') throw new TypeError(`reactAgentEpics: "claimId" must be a function giving a new claim id, got ${typeof claimId}`);
  checkNoInternalNames('reactAgentEpics', tools);
  const registry = toolRegistry('reactAgentEpics', tools);
  const specs = toolSpecs(tools);
  const loop = (runes$: Observable<Rune> | undefined): Epic =>
    stateEffects({
      name: 'reactAgentLoop',
      machine: reactAgent,
      states: 'any',
      withState: true,
      effects: (view, context): EffectsByKey<typeof reactAgent> => {
        const { state } = view;
        if (state === undefined || parseStreamId(view.stream)?.kind !== 'react') return {};
        const roundRefusal$ = roundRefusalOf(view, context, budgets);
        // A chain falling over from an empty answer makes another call: not once its agent may run no turn.
        const agent = agentOfReact(view.stream);
        const callContext: ModelCallContext =
          agent === undefined
            ? context
            : Object.assign(Object.create(context) as EpicContext, { fallOverRefusal: (spent: SpentCall) => fallOverRefusal$(agent, context, budgets, prices, spent) });
        const deps: ReactAgentEffectDeps = {
          stream: view.stream,
          call: (request) => call(request, callContext),
          registry,
          specs,
          ...(system === undefined ? {} : { system }),
          scheduler: context.scheduler,
          ...(prices === undefined ? {} : { prices }),
          apply: (input, at) => applyAgentInput(input, at),
          claims: claimsOn(view, claimId),
          ...(roundRefusal$ === undefined ? {} : { roundRefusal$ }),
        };
        return Object.fromEntries(
          Object.entries(reactAgentEffectsAt(state)).map(([key, effect]) => {
            const effect$ = runReactAgentEffect(effect, state, deps, originOf(view, effect));
            const run = effect.type === 'call-llm' ? unlessRefused(view.stream, state, effect.answersTo, context, effect$, budgets) : effect$;
            return [key, runes$ === undefined ? run : started$(view.stream, runes$, context).pipe(switchMap((started) => (started ? run : EMPTY)))];
          }),
        );
      },
    });
  if (!gated) return loop(undefined);
  return function reactAgentLoop(runes$, context, deps) {
    return loop(runes$)(runes$, context, deps);
  };
}
