import type { LanguageModel } from 'ai';
import type { Epic } from '../../streams/epic.js';
import { chainCall$, type ProviderChain } from '../llm/provider-chain.js';
import { providerBreakers } from '../llm/provider-breakers.js';
import { toolCallEffects } from '../tools/tool-call-effects.js';
import type { AnyTool } from '../tools/tool.js';
import { toolSpecs } from '../tools/tool-specs.js';
import { agentModel } from './agent-model.js';
import { agentTurns } from './agent-turns.js';
import { agentBudgets } from './agent-budgets.js';
import type { Budget, PriceTable } from '../../reducers/budget.js';

/** Options of {@link agentEpics}. */
export interface AgentEpicsOptions {
  /** One model (a chain of one provider, named `"model"`), or a provider chain with fallback. */
  readonly model: LanguageModel | ProviderChain;
  /** The tools every agent may call. Default: none. */
  readonly tools?: readonly AnyTool[];
  /** The system prompt of every agent. Default: none. */
  readonly system?: string;
  /** How long a tool call may wait for approval. Default 600,000 ms (10 minutes). */
  readonly approvalTimeoutMs?: number;
  /** Limits on each agent's usage (see `agentBudgets`). Default: none. */
  readonly budget?: Budget;
  /** Limits on each conversation's usage, all its agents together (see `agentBudgets`). Default: none. */
  readonly conversationBudget?: Budget;
  /** Prices per model id, for the `cost` of each response and the `cost` dimension of budgets. Default: none. */
  readonly prices?: PriceTable;
}

const isChain = (model: LanguageModel | ProviderChain): model is ProviderChain =>
  typeof model === 'object' && model !== null && Array.isArray((model as ProviderChain).providers);

/** A model as a provider chain: a chain as it is, one model as a chain of one provider named `"model"`. */
export const chainOf = (model: LanguageModel | ProviderChain): ProviderChain => (isChain(model) ? model : { providers: [{ name: 'model', model }] });

/**
 * Every epic an engine needs to run agents (seeds 002–004): the model's answers (`agentModel`,
 * through the provider chain and its breakers), the turns (`agentTurns`), their budgets (`agentBudgets`), the tool calls
 * (`toolCallEffects`: approval, execution, timeouts, and their crash recovery). Pass them to
 * `createEngine({ epics })`; then spawning `<root>/agent/<a>/turn` (machine `turn-engine`; see `agentStreams`) is an agent.
 *
 * ## Example
 * ```ts
 * import { filter, firstValueFrom } from 'rxjs';
 * import { z } from 'zod';
 * import { createEngine, type TurnEngineState } from 'runestream';
 * import { agentEpics, defineTool, scriptedModel } from 'runestream/agents';
 *
 * const clock = defineTool({ name: 'clock', description: 'The time now.', inputSchema: z.object({}), execute: () => '12:00' });
 * // Offline: a scripted model asks for the clock, then answers with what it said.
 * const model = scriptedModel([{ toolCalls: [{ toolName: 'clock', input: {} }] }, { text: 'It is 12:00.' }]);
 * const engine = createEngine({ epics: agentEpics({ model, tools: [clock] }) });
 * await engine.spawn('conv/c1/agent/a1/turn', 'turn-engine');
 * const answered = firstValueFrom(engine.state$<TurnEngineState>('conv/c1/agent/a1/turn').pipe(filter((s) => s.value === 'idle' && s.turn === 1)));
 * await engine.dispatch('conv/c1/agent/a1/turn', { type: 'start_turn', input: 'What time is it?' });
 * console.log((await answered).output);
 * // Logs: It is 12:00.
 * await engine.close();
 * ```
 */
export function agentEpics(options: AgentEpicsOptions): Epic[] {
  const { model, tools = [], system, approvalTimeoutMs, budget, conversationBudget, prices } = options;
  const chain = chainOf(model);
  const limits = { ...(budget === undefined ? {} : { budget }), ...(conversationBudget === undefined ? {} : { conversationBudget }) };
  return [
    agentModel({
      call: (request, context) => chainCall$(chain, request, context),
      tools: toolSpecs(tools),
      ...(system === undefined ? {} : { system }),
      ...(prices === undefined ? {} : { prices }),
    }),
    agentTurns(limits),
    agentBudgets(limits),
    toolCallEffects({ tools, ...(approvalTimeoutMs === undefined ? {} : { approvalTimeoutMs }) }),
    providerBreakers(chain),
  ];
}
