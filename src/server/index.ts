/**
 * runestream/server: the WebSocket and HTTP server (`ws`): its options, access hooks, routes and
 * diagnostics channels. The wire protocol's schemas are in the root, so a client needs no server.
 */
export { createServer, type RunestreamServer } from './server.js';
export type { DispatchRate, OnDrive, PartialResponse, ServerOptions, SlowClientPolicy } from './options.js';
export type { AccessAction, AccessRequest, Authorize, Credential, Identity, Verify } from './access.js';
export type { Route, RouteContext, RouteHandler } from './routes.js';
// Approvals and several identities (issue 26): what a hook is told, and serve's --tokens-file.
export { APPROVAL_EVENTS, type AccessDetails } from './access.js';
export { MAX_TOKENS, TokenAction, TokenHolder, TokensFile, tokenIdentities } from './token-identities.js';
export { archivalRoutes, type ArchivalRoutesOptions } from './archival-routes.js';
export { agUiRoutes, type AgUiAgent, type AgUiRoutesOptions } from './ag-ui/ag-ui-routes.js';
export { agUiRun$, type AgUiRunCall, type AgUiRunStart } from './ag-ui/ag-ui-run.js';
export {
  APPROVAL_INTERRUPT_PREFIX,
  callRuneEvents,
  roundStatus,
  startRun,
  turnRuneEvents,
  type AgUiRun,
  type AgUiState,
  type AgUiStep,
  type RoundStatus,
} from './ag-ui/ag-ui-events.js';
export { AgUiResumeEntry, AgUiRunInput } from './ag-ui/ag-ui-request.js';
export type { HttpError } from './http-reply.js';
export { SERVER_CHANNELS, type ConnectionReport, type SentReport, type SlowClientReport } from './diagnostics.js';
export {
  AgentConfig,
  ChainConfig,
  CliConfig,
  MAX_CONFIG_BYTES,
  McpServerConfig,
  ModelConfig,
  ServerConfig,
  ServerConfigError,
  parseServerConfig,
  type ServerConfigIssue,
} from './config/server-config.js';
export { configuredAgents, type ConfiguredAgents, type ConfiguredAgentsOptions } from './config/configured-agents.js';
export { configuredClis, type ConfiguredClis, type ConfiguredClisOptions } from './config/configured-clis.js';
export { createMetrics, type MetricsOptions, type ObserveOptions, type RunestreamMetrics } from '../effects/metrics/metrics.js';
export { METRICS_COLLECTOR_STREAM, metricsCollectorEpic, type MetricsCollectorOptions } from '../effects/metrics/metrics-collector-epic.js';
export { fileMetricsSink, memoryMetricsSink, type MemoryMetricsSink, type MetricsSink, type MetricsSnapshot } from '../effects/metrics/metrics-sink.js';
export { OTHER_LABEL_VALUE } from '../effects/metrics/bounded-labels.js';
