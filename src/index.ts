/**
 * runestream, the light core: the machines, the operators, the engine, the memory store, the epic
 * types and the wire protocol's schemas. It loads rxjs and zod and nothing heavier: no LLM SDK,
 * no MCP SDK, no native SQLite binding, no WebSocket server (test/entries/root-weight.test.ts holds
 * it to that). The rest has its own entry:
 *
 * - `runestream/sqlite`: the SQLite store (better-sqlite3).
 * - `runestream/agents`: models, provider chains, tools, MCP, agent turns, the ReAct runtime (the AI SDK, the MCP SDK).
 * - `runestream/server`: the WebSocket and HTTP server (ws).
 * - `runestream/client`: the browser-safe client.
 * - `runestream/store-kit`: for store authors: the helpers every store shares and the contract suite.
 *
 * Every name is listed here on purpose; what is not listed is internal.
 */

// Machines (src/reducers): the machine shape, defining one, checking untrusted input.
export type { AnyMachine, EventObject, EventOf, InputOf, Machine, RejectionCode, RunePayload, StateOf, Step } from './reducers/machine.js';
export {
  defineMachine,
  edgesOf,
  type Edge,
  type FiniteState,
  type PayloadSchemas,
  type PayloadsOf,
  type Row,
  type RowSource,
  type TableDefinition,
  type TableMachine,
} from './reducers/table.js';
export { eventTypesOf } from './reducers/event-types.js';
export { stepUnknown, validateEvent, type EventCheck } from './reducers/validate.js';
export { machines, type MachineId } from './reducers/machines.js';
export {
  atRest,
  reactAgentRest,
  restingStates,
  type DataRestingState,
  type FiniteMachineId,
  type FiniteRestingState,
  type Rest,
  type RestCondition,
  type RestingState,
  type RestingStateOf,
} from './reducers/resting-states.js';
export { DEFAULT_VALUE_LIMITS, storableValue, type ValueLimitCode, type ValueLimits } from './reducers/value-limits.js';
export { ERROR_TEXT_MAX_LENGTH, errorText } from './reducers/error-text.js';
export { exponentialDelay } from './reducers/backoff.js';

// Runes and the seed-003 invariants over a log of them.
export { runeEventSchemas, runePayloadSchemas } from './reducers/rune-payloads.js';
export { foldEvents, foldRune } from './reducers/fold.js';
export { Rune, SPAWN_EVENT_TYPE, isRuneOf, type AnyRuneEvent, type RuneOf, type SpawnEvent, type StateNameOf } from './reducers/rune.js';
export { RuneOrigin, CALLER_ORIGIN, clientOrigin, type EffectSource } from './reducers/rune-origin.js';
export { InvariantName, InvariantViolation, checkInvariants, type CheckInvariantsOptions } from './reducers/invariants.js';
export { Budget, BudgetDimension, BudgetOverrun, NO_USAGE, PriceTable, Usage, addUsage, budgetOverrun } from './reducers/budget.js';
export {
  MAX_SEGMENT,
  agentStreams,
  chatActorStream,
  chatStream,
  conversationStream,
  isSegment,
  parseStreamId,
  planStream,
  rootOf,
  toSegment,
  type AgentStreams,
  type RootKind,
  type StreamIdParts,
} from './reducers/stream-ids.js';

// The machines of the five seeds, with their schemas and helpers.
export * from './reducers/chat-actor/index.js';
export * from './reducers/agent-manager-session/index.js';
export * from './reducers/circuit-breaker/index.js';
export * from './reducers/agent-registration/index.js';
export * from './reducers/connection/index.js';
export * from './reducers/metrics-collector/index.js';
export * from './reducers/archival/index.js';
export * from './reducers/turn-engine/index.js';
export * from './reducers/tool-call/index.js';
export * from './reducers/conversation/index.js';
export * from './reducers/agent-lifecycle/index.js';
export * from './reducers/autonomy-loop/index.js';
export * from './reducers/react-agent/index.js';

// Operators and the engine (src/streams).
export { reduceWith } from './streams/reduce-with.js';
export {
  createMoorex,
  type Moorex,
  type MoorexDefinition,
  type MoorexEffectController,
  type MoorexEffectEvent,
  type MoorexEffectRun,
} from './streams/moorex.js';
export {
  createEngine,
  type DispatchOptions,
  type DispatchResult,
  type Engine,
  type EngineError,
  type EngineOptions,
  type EngineRejectionCode,
  type RunesOptions,
} from './streams/engine.js';
export { dispatchTo } from './streams/dispatch-to.js';
export type { DispatchSink } from './streams/submit.js';
export { ENGINE_CHANNELS, type DispatchReport, type HydrationReport, type StoreAppendReport } from './streams/diagnostics.js';
export { ofMachine } from './streams/of-machine.js';
export { ofKind, type EventOfKind, type RuneOfKind } from './streams/of-kind.js';
export { notices, type RuneNotice, type StreamNotice } from './streams/notices.js';
export { StreamReadError, type StreamReadErrorCode } from './streams/stream-read-error.js';
export { timerWheel, type TimerWheel } from './streams/timer-wheel.js';
export { MAX_LINE_LENGTH, splitLines, type SplitLinesOptions } from './streams/split-lines.js';

// Stores: the memory store, and what an engine's caller meets of any store.
export { memoryStore } from './streams/memory-store.js';
export {
  StoreConflictError,
  StoreError,
  StoreFencedError,
  type AppendOptions,
  type Fence,
  type HeadsQuery,
  type RuneStore,
  type Snapshot,
  type StoreErrorCode,
  type StreamHead,
  type TailListener,
} from './streams/store.js';

// Cold storage (archives of streams, metrics snapshots): the interface, the folder store, the format.
export { ArchiveError, type ArchiveErrorCode, type ArchiveManifest, type ArchiveSegment, type ColdStore } from './streams/archive/cold-store.js';
export { ColdKeyError, MAX_COLD_KEY_LENGTH, MAX_COLD_KEY_PART_LENGTH, checkColdKey, checkColdPrefix, streamKeyPart } from './streams/archive/cold-key.js';
export { fsColdStore, type FsColdStoreOptions } from './streams/archive/fs-cold-store.js';
export { archivePrefix, manifestKey, segmentKey } from './streams/archive/archive-format.js';
export { writeArchive, type WriteArchiveOptions } from './streams/archive/write-archive.js';
export { readArchivedRunes, readManifest, type ReadArchivedRunesOptions } from './streams/archive/read-archive.js';
export { verifyArchive, type ArchiveVerification } from './streams/archive/verify-archive.js';
export { restoreRunes, type RestoreRunesOptions } from './streams/archive/restore-runes.js';
export { storeRunePages, type StoreRunePagesOptions } from './streams/archive/store-rune-pages.js';
export { metricsSnapshotKey, readMetricsSnapshot, writeMetricsSnapshot } from './streams/archive/metrics-snapshot.js';

// Epics: their types, and the light ones (no LLM, no tools runtime).
export { isSpawnCommand, type DispatchCommand, type Epic, type EpicCommand, type EpicContext, type EpicReport, type SpawnCommand } from './streams/epic.js';
export { stateEffects, type EffectOwnership } from './streams/effect-host.js';
export { type Effect, type EffectOrigin, type EffectsByKey, type StateEffects, type StreamView } from './streams/state-effects.js';
export { durableDeadline, type DurableDeadlineOptions } from './streams/durable-deadline.js';
export { chatActorLifecycle, type ChatActorLifecycleOptions } from './effects/chat-actor-lifecycle.js';
export { INTERRUPTED_BY_RESTART, toolCallRecovery, type ToolCallRecoveryOptions } from './effects/tool-call-recovery.js';
// Archival runs and retention (seed 002's ArchivalService): the epic, and archiving or restoring a target now.
export { archivalEpic, type ArchivalOptions } from './effects/archival/archival-epic.js';
export { ARCHIVAL_PREFIX, archivalStream } from './effects/archival/archival-streams.js';
export { checkRetentionRules, type RetentionKeep, type RetentionRule } from './effects/archival/retention.js';
export {
  ArchivalRequestError,
  archiveTarget,
  restoreTarget,
  type ArchivalHost,
  type ArchivalRequestCode,
  type ArchiveOutcome,
  type ArchivedStream,
} from './effects/archival/archival-requests.js';
export type { RestoredStream } from './effects/archival/archive-steps.js';

// The wire protocol's schemas (what a server and a client send each other): zod and the machines only.
export {
  AckMessage,
  CLOSE_CODES,
  ClientMessage,
  DispatchMessage,
  ErrorMessage,
  ProtocolErrorCode,
  RuneMessage,
  ServerMessage,
  SnapshotMessage,
  SpawnMessage,
  SubscribeMessage,
  UnsubscribeMessage,
} from './server/protocol.js';
