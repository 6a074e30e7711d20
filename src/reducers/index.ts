export * from './machine.js';
export * from './table.js';
export * from './mermaid.js';
export * from './validate.js';
export { errorText, ERROR_TEXT_MAX_LENGTH } from './error-text.js';
export { DEFAULT_VALUE_LIMITS, type ValueLimits, type ValueLimitCode } from './value-limits.js';
// Seed 000
export * from './chat-actor/index.js';
// Seed 001
export * from './agent-manager-session/index.js';
// Seed 002
export * from './circuit-breaker/index.js';
export * from './agent-registration/index.js';
export * from './connection/index.js';
export * from './metrics-collector/index.js';
export * from './archival/index.js';
// Seed 003
export * from './turn-engine/index.js';
export * from './tool-call/index.js';
export * from './conversation/index.js';
export * from './agent-lifecycle/index.js';
export * from './autonomy-loop/index.js';
export * from './rune.js';
export * from './fold.js';
export * from './invariants.js';
// Seed 004
export * from './react-agent/index.js';
export * from './machines.js';
export * from './event-types.js';
