import { agentLifecycle } from './agent-lifecycle/index.js';
import { agentManagerSession } from './agent-manager-session/index.js';
import { agentRegistration } from './agent-registration/index.js';
import { archival } from './archival/index.js';
import { autonomyLoop } from './autonomy-loop/index.js';
import { chatActor } from './chat-actor/index.js';
import { circuitBreaker } from './circuit-breaker/index.js';
import { connection } from './connection/index.js';
import { conversation } from './conversation/index.js';
import type { AnyMachine } from './machine.js';
import { metricsCollector } from './metrics-collector/index.js';
import { reactAgent } from './react-agent/index.js';
import { toolCall } from './tool-call/index.js';
import { turnEngine } from './turn-engine/index.js';

/**
 * Every machine of the seed documents, by id, with the seed that specifies it: what a host
 * spawns by name (`{op: "spawn", machine: "tool-call"}`) and what docs/machines.md lists.
 */
export const machines = {
  'chat-actor': chatActor,
  'agent-manager-session': agentManagerSession,
  'circuit-breaker': circuitBreaker,
  'agent-registration': agentRegistration,
  connection,
  'metrics-collector': metricsCollector,
  archival,
  'turn-engine': turnEngine,
  'tool-call': toolCall,
  conversation,
  'agent-lifecycle': agentLifecycle,
  'autonomy-loop': autonomyLoop,
  'react-agent': reactAgent,
} as const satisfies Record<string, AnyMachine>;

/** The id of a machine in {@link machines}. */
export type MachineId = keyof typeof machines;

/** The seed document (in ../shared/seeds) of each machine. */
export const machineSeeds: Readonly<Record<MachineId, string>> = {
  'chat-actor': '000',
  'agent-manager-session': '001',
  'circuit-breaker': '002',
  'agent-registration': '002',
  connection: '002',
  'metrics-collector': '002',
  archival: '002',
  'turn-engine': '003',
  'tool-call': '003',
  conversation: '003',
  'agent-lifecycle': '003',
  'autonomy-loop': '003',
  'react-agent': '004',
};
