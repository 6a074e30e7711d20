import { scriptedModel, type ProviderChain, type ScriptStep } from '../../src/agents.js';

/**
 * A chain whose first provider answers empty (no text, no tool call; 100 input tokens), so the
 * chain falls over to the second, which answers `second`: the empty answer is a call the first
 * provider answered and billed.
 */
export const afterEmptyAnswer = (second: ScriptStep): ProviderChain => ({
  providers: [
    { name: 'first', model: scriptedModel([{ usage: { inputTokens: 100, outputTokens: 0 } }]) },
    { name: 'second', model: scriptedModel([second]) },
  ],
});
