import type { LanguageModel, ModelMessage } from 'ai';
import { Observable, asyncScheduler, concat, defer, filter, map, of, type SchedulerLike } from 'rxjs';
import { reactAgentEffectsAt, type ReactAgentEffect } from '../../reducers/react-agent/effects.js';
import { initialAgentState } from '../../reducers/react-agent/initial.js';
import type { AgentInput } from '../../reducers/react-agent/input.js';
import type { AgentState } from '../../reducers/react-agent/state.js';
import { agentTransition, type AgentTransitionOptions } from '../../reducers/react-agent/transition.js';
import { createMoorex, type Moorex } from '../../streams/moorex.js';
import { modelCall$ } from '../llm/model-call.js';
import type { ToolSpec } from '../llm/model-types.js';
import { runTool } from '../tools/run-tool.js';
import type { AnyTool } from '../tools/tool.js';
import { toolRegistry } from '../tools/tool-registry.js';
import { toolSpecs } from '../tools/tool-specs.js';

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
    let input: unknown;
    try {
      input = JSON.parse(call.parameters);
    } catch {
      input = call.parameters;
    }
    const output =
      call.result === null
        ? { type: 'error-text' as const, value: 'no result yet' }
        : call.result.isSuccess
          ? { type: 'text' as const, value: call.result.content }
          : { type: 'error-text' as const, value: call.result.error };
    timed.push({
      at: call.calledAt,
      messages: [
        { role: 'assistant', content: [{ type: 'tool-call', toolCallId, toolName: call.name, input }] },
        { role: 'tool', content: [{ type: 'tool-result', toolCallId, toolName: call.name, output }] },
      ],
    });
  }
  return timed.sort((a, b) => a.at - b.at).flatMap((t) => t.messages);
}

/**
 * Seed 004's ReAct agent, run by `createMoorex` with the same models and tools as the turn-based
 * agents: its state says which effects are due (`reactAgentEffectsAt`), and this runs them.
 *
 * - `call-llm`: one model call (`modelCall$`) with the window's messages and the loop's tool calls;
 *   it reports `llm-message-started`, `llm-message-completed` with the text, then `re-act-observed`
 *   with the tool calls the model asked for (`continue-re-act`) or `complete-re-act`.
 * - `call-tool`: one run of the tool (`runTool`: timeout, abort on cancel), reported as
 *   `tool-call-completed` (an unknown tool or bad arguments: a failed result saying why).
 *
 * Timestamps come from the scheduler and never repeat (the seed's time never goes back).
 */
export function reactAgentRuntime(options: ReactAgentRuntimeOptions): ReactAgentRuntime {
  const { model, tools = [], system, scheduler = asyncScheduler, callTimeoutMs, ...transitionOptions } = options;
  const registry = toolRegistry('reactAgentRuntime', tools);
  const specs: Record<string, ToolSpec> = toolSpecs(tools);
  let last = 0;
  const now = (): number => (last = Math.max(last + 1, scheduler.now()));
  let messages = 0;

  const callLlm = (answersTo: number, state: AgentState): Observable<AgentInput> =>
    defer(() => {
      const messageId = `llm-${answersTo}`;
      const asked: Record<string, { name: string; parameters: string; calledAt: number }> = {};
      let text = '';
      const call$ = modelCall$(
        model,
        { ...(system === undefined ? {} : { system }), messages: reactAgentMessages(state), tools: specs },
        {
          scheduler,
          ...(callTimeoutMs === undefined ? {} : { timeoutMs: callTimeoutMs }),
        },
      ).pipe(
        map((part) => {
          if (part.type === 'text-delta') text += part.text;
          else if (part.type === 'tool-call') asked[part.toolCallId] = { name: part.toolName, parameters: JSON.stringify(part.input ?? null), calledAt: now() };
          return undefined;
        }),
        filter((_part): _part is never => false),
      );
      // Timestamps in the order the inputs are applied: time never goes back.
      const end = defer((): Observable<AgentInput> => {
        const completed: AgentInput = { type: 'llm-message-completed', messageId, content: text, timestamp: now() };
        const observed: AgentInput = {
          type: 're-act-observed',
          calledLlmAt: answersTo,
          observation: Object.keys(asked).length > 0 ? { type: 'continue-re-act', toolCalls: asked } : { type: 'complete-re-act' },
          timestamp: now(),
        };
        return of(completed, observed);
      });
      return concat(of<AgentInput>({ type: 'llm-message-started', messageId, timestamp: now() }), call$, end);
    });

  const callTool = (effect: Extract<ReactAgentEffect, { type: 'call-tool' }>): Observable<AgentInput> => {
    let args: unknown;
    try {
      args = JSON.parse(effect.parameters);
    } catch {
      args = effect.parameters;
    }
    const resolved = registry.resolve({ toolName: effect.name, arguments: args as never });
    const completed = (result: { isSuccess: true; content: string } | { isSuccess: false; error: string }): AgentInput => {
      const timestamp = now();
      return { type: 'tool-call-completed', toolCallId: effect.toolCallId, result: { ...result, receivedAt: timestamp }, timestamp };
    };
    if (!resolved.ok) return of(completed({ isSuccess: false, error: resolved.error }));
    return runTool(resolved.tool, resolved.input, scheduler).pipe(
      map((event) => {
        switch (event.type) {
          case 'success':
            return completed({ isSuccess: true, content: typeof event.output === 'string' ? event.output : JSON.stringify(event.output) });
          case 'execution_error':
            return completed({ isSuccess: false, error: event.error });
          case 'execution_timeout':
            return completed({ isSuccess: false, error: `tool "${effect.name}" timed out` });
          default:
            return undefined;
        }
      }),
      filter((input): input is AgentInput => input !== undefined),
    );
  };

  const moorex = createMoorex<AgentState, AgentInput, ReactAgentEffect>({
    initial: initialAgentState({
      tools: Object.fromEntries(Object.entries(specs).map(([name, spec]) => [name, { description: spec.description, schema: JSON.stringify(spec.inputSchema) }])),
    }),
    transition: (input) => agentTransition(input, transitionOptions),
    effectsAt: reactAgentEffectsAt,
    runEffect: (effect, state) => (effect.type === 'call-llm' ? callLlm(effect.answersTo, state) : callTool(effect)),
  });
  return Object.assign(moorex, {
    say(content: string) {
      moorex.dispatch({ type: 'user-message-received', messageId: `user-${++messages}`, content, timestamp: now() });
    },
  });
}
