/** The model layer of the agent runtime: models, one call, the provider chain and its breakers. */
export type { ChainOutput, ModelPart, ModelRequest, Provider, ToolSpec } from './model-types.js';
export {
  ScriptExhaustedError,
  scriptedModel,
  type ScriptEntry,
  type ScriptStep,
  type ScriptedModel,
  type ScriptedModelOptions,
  type ScriptedToolCall,
} from './scripted-model.js';
export { ModelCallTimeoutError, modelCall$, type ModelCallOptions } from './model-call.js';
export { AllProvidersFailedError, chainCall$, providerBreakerStream, type ChainContext, type ProviderChain, type ProviderFailure } from './provider-chain.js';
export { providerBreakers, type ProviderBreakersOptions } from './provider-breakers.js';
