import type { LanguageModel } from 'ai';
import { asyncScheduler, filter, map, type SchedulerLike } from 'rxjs';
import { reactAgentEffectsAt, type ReactAgentEffect } from '../../reducers/react-agent/effects.js';
import { initialAgentState } from '../../reducers/react-agent/initial.js';
import type { AgentInput } from '../../reducers/react-agent/input.js';
import type { AgentState } from '../../reducers/react-agent/state.js';
import { agentTransition, applyAgentInput, type AgentTransitionOptions } from '../../reducers/react-agent/transition.js';
import { createMoorex, type Moorex } from '../../streams/moorex.js';
import { modelCall$ } from '../llm/model-call.js';
import type { ChainOutput } from '../llm/model-types.js';
import type { AnyTool } from '../tools/tool.js';
import { toolRegistry } from '../tools/tool-registry.js';
import { toolSpecs } from '../tools/tool-specs.js';
import { runReactAgentEffect, type ReactAgentEffectDeps } from './react-agent-effects.js';
import { checkNoInternalNames } from './react-internal-tools.js';

/** Options of {@link reactAgentRuntime}. */
export interface ReactAgentRuntimeOptions extends AgentTransitionOptions {
  /** Any AI SDK language model. */
  readonly model: LanguageModel;
  /** The tools the model may call. Default: none. */
  readonly tools?: readonly AnyTool[];
  /** The system prompt. Default: none. */
  readonly system?: string;
  /** The clock of every input's timestamp and of the tools' timeouts. Default: rxjs `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
  /** A model call fails if it produces nothing for this long. Default 120,000 ms. */
  readonly callTimeoutMs?: number;
}

/** A ReAct agent running: its Moorex, and a way to talk to it. */
export interface ReactAgentRuntime extends Moorex<AgentState, AgentInput, ReactAgentEffect> {
  /** Sends a user message (its id and timestamp are made here). */
  say(content: string): void;
}

/**
 * Seed 004's ReAct agent, run by `createMoorex` with the same models and tools as the turn-based
 * agents: its state says which effects are due (`reactAgentEffectsAt`), and this runs them.
 *
 * - `call-llm`: a model call (`modelCall$`) with the window's messages, the loop's tool calls and
 *   the internal tools of seed 004 (answered inside the call); it reports `llm-message-started`,
 *   `llm-message-completed` with the text, then `re-act-observed` with the external tool calls the
 *   model asked for (`continue-re-act`) or `complete-re-act`.
 * - `call-tool`: one run of the tool (`runTool`: timeout, abort on cancel), reported as
 *   `tool-call-completed` (an unknown tool or bad arguments: a failed result saying why).
 *
 * The effects are the engine's (`reactAgentEpics`): only where they run differs. Timestamps come
 * from the scheduler; equal ones take effect in dispatch order (see `agentTransition`).
 */
export function reactAgentRuntime(options: ReactAgentRuntimeOptions): ReactAgentRuntime {
  const { model, tools = [], system, scheduler = asyncScheduler, callTimeoutMs, ...transitionOptions } = options;
  checkNoInternalNames('reactAgentRuntime', tools);
  const specs = toolSpecs(tools);
  const deps: ReactAgentEffectDeps = {
    call: (request) =>
      modelCall$(model, request, { scheduler, ...(callTimeoutMs === undefined ? {} : { timeoutMs: callTimeoutMs }) }).pipe(
        map((part): ChainOutput => ({ type: 'part', part })),
      ),
    registry: toolRegistry('reactAgentRuntime', tools),
    specs,
    ...(system === undefined ? {} : { system }),
    scheduler,
    apply: (input, state) => applyAgentInput(input, state, transitionOptions),
  };
  let messages = 0;
  const moorex = createMoorex<AgentState, AgentInput, ReactAgentEffect>({
    initial: initialAgentState({
      tools: Object.fromEntries(Object.entries(specs).map(([name, spec]) => [name, { description: spec.description, schema: JSON.stringify(spec.inputSchema) }])),
    }),
    transition: (input) => agentTransition(input, transitionOptions),
    effectsAt: reactAgentEffectsAt,
    // Nothing here makes commands (no provider chain): only the agent's own inputs.
    runEffect: (effect, state) => runReactAgentEffect(effect, state, deps, 'live').pipe(filter((out): out is AgentInput => !('stream' in out))),
  });
  return Object.assign(moorex, {
    say(content: string) {
      moorex.dispatch({ type: 'user-message-received', messageId: `user-${++messages}`, content, timestamp: scheduler.now() });
    },
  });
}
