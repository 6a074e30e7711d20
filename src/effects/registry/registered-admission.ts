import { agentDefinitionStream } from '../../reducers/agent-registration/definition.js';
import { agentRegistration } from '../../reducers/agent-registration/machine.js';
import type { AgentAdmission } from '../agent/agent-companions.js';
import { stateOf } from '../agent/state-of.js';

/** Options of {@link registeredAgentAdmission}. */
export interface RegisteredAgentAdmissionOptions {
  /** The role of an agent spawned without one (a conversation's root agent, as a client spawns it). Default: none (such agents are not gated). */
  readonly defaultRole?: string;
}

/**
 * The agent registry's say on which agents start (`agentEpics({ admission })`): an agent whose
 * role has a registration (`agent-def/<role>`) starts only while that registration is ACTIVE;
 * otherwise its lifecycle gets `init_error` naming the registration's state (and why it is
 * paused or failed), and its turns are interrupted with it. A role with no registration is not
 * the registry's to gate: it starts as without a registry.
 */
export function registeredAgentAdmission(options: RegisteredAgentAdmissionOptions = {}): AgentAdmission {
  const { defaultRole } = options;
  return async (role, context) => {
    const name = role ?? defaultRole;
    if (name === undefined) return undefined;
    const registration = await stateOf(context, agentDefinitionStream(name), agentRegistration);
    if (registration === undefined || registration.value === 'ACTIVE') return undefined;
    const why = registration.reason ?? registration.error;
    return `agent "${name}" is ${registration.value}${why === undefined ? '' : ` (${why})`}: new conversations start only on ACTIVE agents`;
  };
}
