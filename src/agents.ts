/**
 * runestream/agents: LLM agents on the engine. Model calls on the AI SDK, provider chains with
 * their circuit breakers, a scripted model for tests, tools and their effects, MCP servers, the
 * agent turn epics (seed 003) and the ReAct runtime (seed 004). It loads `ai`, `@ai-sdk/provider`
 * and `@modelcontextprotocol/sdk`; the machines these drive (`turnEngine`, `toolCall`, ...) are in
 * the root.
 */

// Models: one call, a chain of providers with fallback, their breakers, and a scripted model.
export type { ChainOutput, ModelPart, ModelRequest, Provider, SpentCall, ToolSpec } from './effects/llm/model-types.js';
export { ModelCallTimeoutError, modelCall$, type ModelCallOptions } from './effects/llm/model-call.js';
export { MODEL_CALL_CHANNEL, type ModelCallReport } from './effects/llm/model-call-channel.js';
export {
  AllProvidersFailedError,
  FallOverRefusedError,
  chainCall$,
  providerBreakerStream,
  type ChainContext,
  type ProviderChain,
  type ProviderFailure,
} from './effects/llm/provider-chain.js';
export { providerBreakers, type ProviderBreakersOptions } from './effects/llm/provider-breakers.js';
export { agentChecks$, type AgentCheckOutput, type AgentChecksOptions } from './effects/registry/agent-checks.js';
export { PROFILE_UNAVAILABLE, agentRegistry, type AgentRegistryOptions } from './effects/registry/agent-registry.js';
export { registeredAgentAdmission, type RegisteredAgentAdmissionOptions } from './effects/registry/registered-admission.js';
export { registerDefinitions, type DefinitionRegistration } from './effects/registry/register-definitions.js';
export { CLIENT_TOOL_TIMEOUT_MS, clientTool } from './effects/tools/client-tool.js';
export type { AgentAdmission } from './effects/agent/agent-companions.js';
export { EmptyAnswerError, MAX_ERROR_BODY_LENGTH, MAX_RETRY_AFTER_MS, ProviderFailedError, retryAfterMsOf } from './effects/llm/provider-errors.js';
export {
  ScriptExhaustedError,
  scriptedModel,
  type ScriptEntry,
  type ScriptStep,
  type ScriptedModel,
  type ScriptedModelOptions,
  type ScriptedToolCall,
} from './effects/llm/scripted-model.js';

// Tools: defining them, running them, the epic that drives every tool call, MCP servers.
export { defineTool, type AnyTool, type DefineToolOptions, type Tool, type ToolExecutionContext, type ToolInputCheck } from './effects/tools/tool.js';
export { toolSpecs } from './effects/tools/tool-specs.js';
export { BUILTIN_TOOL_NAMES, builtinTools, type BuiltinToolName } from './effects/tools/builtin-tools.js';
export { ToolAbortError, ToolTimeoutError, runTool } from './effects/tools/run-tool.js';
export { NonJsonOutputError, type JsonValue } from './effects/tools/json-output.js';
export { DEFAULT_MAX_TOOL_RESULT_BYTES, ToolResultTooLargeError } from './effects/tools/tool-result-limits.js';
export { toolCallEffects, type ToolCallEffectsOptions } from './effects/tools/tool-call-effects.js';
export type { ToolScope } from './effects/tools/tool-scope.js';
export { ToolNameClashError, toolRegistry, type ResolvedCall, type ToolRegistry } from './effects/tools/tool-registry.js';
export { connectMcp, type ConnectMcpOptions, type McpArguments, type McpConnection, type McpToolInfo } from './effects/tools/connect-mcp.js';

// Agents: the turn-based agent's epics and streams (seed 003), the ReAct runtime (seed 004).
export { agentEpics, type AgentEpicsOptions } from './effects/agent/agent-epics.js';
export type { AgentProfile } from './effects/agent/agent-profile.js';
export { agentProfiles, type AgentProfiles, type AgentProfilesOptions } from './effects/agent/agent-profiles.js';
export { buildAgentProfile, profileToolkit, type BuiltProfile, type ProfileToolkit } from './effects/agent/agent-profile-builder.js';
export { conversationClose, CONVERSATION_CLOSING } from './effects/agent/conversation-close.js';
export { conversationErrors, type ConversationErrorsOptions } from './effects/agent/conversation-errors.js';
export { InvalidOptionError } from './effects/invalid-option.js';
export { DELEGATE_TOOL, DelegateInput, subAgentId, type DelegationLimits } from './effects/agent/delegation.js';
export { transcriptOf } from './effects/agent/transcript.js';
export { digestOf, modelCallRecord, modelRequestOf } from './effects/agent/model-call-record.js';
export { reactAgentRuntime, type ReactAgentRuntime, type ReactAgentRuntimeOptions } from './effects/agent/react-agent-runtime.js';
export { reactAgentEpics, type ReactAgentEpicsOptions } from './effects/agent/react-agent-epics.js';

// Chats (seed 000) that talk: each chat's actors hand their messages to the chat's agent.
export { chatTalk, sendChatMessage, type ChatMessage, type ChatTalkOptions, type SentChatMessage } from './effects/chat-talk.js';
export { chatPartialResponse } from './effects/chat-partial-response.js';

// Agent CLIs (seed 001): configured CLIs run as session processes, through their protocol's adapter.
export {
  DEFAULT_CLI_IDLE_TIMEOUT_MS,
  DEFAULT_CLI_KILL_GRACE_MS,
  type AgentCliAdapter,
  type AgentCliSpec,
  type CliLaunch,
  type CliOutput,
  type CliProcessIo,
  type CliRun,
  type CliRunStart,
  type CliUserEvent,
} from './effects/cli/cli-adapter.js';
export { agentCliSessions, PROCESS_LOST_REASON, type AgentCliSessionsOptions } from './effects/cli/agent-cli-sessions.js';
export type { CliErrorCode } from './effects/cli/cli-errors.js';
export { CliSessionLimits, DEFAULT_MAX_RUNNING_SESSIONS, DEFAULT_MAX_SESSIONS_PER_IDENTITY } from './effects/cli/cli-session-limits.js';
export { cliSessionOwners, type CliSessionOwners } from './effects/cli/cli-session-owners.js';
export { CliProcessError, DEFAULT_STDERR_TAIL_BYTES, cliProcess, exitCodeOfSignal, type CliProcessEvent, type CliProcessOptions } from './effects/cli/cli-process.js';
export type { CliSpawnContext, SpawnCliProcess } from './effects/cli/spawn-cli-process.js';
export { cliContainment, type CliContainment } from './effects/cli/cli-containment.js';
export { inProcessCli, type CliProgram, type CliProgramOutput, type CliProgramStart, type InProcessCliOptions } from './effects/cli/in-process-cli.js';
export { ACP_MAX_TOOL_TEXT, ACP_RESUME_PROMPT, acpCliAdapter } from './effects/cli/acp-adapter.js';
export { NDJSON_RESUME_TEXT, ndjsonCliAdapter } from './effects/cli/ndjson-adapter.js';

// The autonomy loop (seed 003): a goal planned, run by the conversation's agents, reviewed.
export { autonomyEpics } from './effects/autonomy/autonomy-epics.js';
export type { AutonomyModel, AutonomyOptions } from './effects/autonomy/autonomy-options.js';
export { autonomyPlanner, PlanAnswer, planCheck } from './effects/autonomy/planner.js';
export { autonomyScheduler } from './effects/autonomy/scheduler.js';
export { autonomyCritic, CriticVerdict } from './effects/autonomy/critic.js';
export { autonomyBudget } from './effects/autonomy/plan-budget.js';
export { jsonOfText, structuredAnswer$, schemaCheck, type AnswerCheck, type StructuredCaller, type StructuredOutput } from './effects/autonomy/structured-answer.js';

// Tracing: OpenTelemetry spans of turns, model calls and tool calls, derived from the runes.
export { TRACER_NAME, tracingEpic, type TracingOptions } from './effects/telemetry/tracing-epic.js';
export { GEN_AI, FIRST_CHUNK_EVENT } from './effects/telemetry/gen-ai.js';
