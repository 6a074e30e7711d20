import type { LanguageModel } from 'ai';
import type { Budget } from '../../reducers/budget.js';
import type { ProviderChain } from '../llm/provider-chain.js';
import type { AnyTool } from '../tools/tool.js';

/**
 * How agents of one role run: what a conversation instantiates when it spawns an agent with that
 * role (the `role` of its `agent.spawning` rune). Every field left out is the `agentEpics` default.
 */
export interface AgentProfile {
  /** Shown to a model that may delegate to this role. */
  readonly description?: string;
  readonly model?: LanguageModel | ProviderChain;
  readonly tools?: readonly AnyTool[];
  readonly system?: string;
  /** Limits on each agent of this role. */
  readonly budget?: Budget;
}
