import { filter, firstValueFrom, map, merge, of, timeout } from 'rxjs';
import { agentDefinitionStream } from '../../reducers/agent-registration/definition.js';
import { agentRegistration } from '../../reducers/agent-registration/machine.js';
import type { AgentAdmission } from '../agent/agent-companions.js';
import type { AgentProfiles } from '../agent/agent-profiles.js';
import { stateOf } from '../agent/state-of.js';

/** Options of {@link registeredAgentAdmission}. */
export interface RegisteredAgentAdmissionOptions {
  /** The role of an agent spawned without one (a conversation's root agent, as a client spawns it). Default: none (such agents are not gated). */
  readonly defaultRole?: string;
  /**
   * The live roles the registry makes ACTIVE definitions into (`agentRegistry({ profiles })`): an
   * agent of an ACTIVE registration whose profile is not there yet (being built, or rebuilt after
   * a restart) waits for it, at most `profileWaitMs`. Default: none (no wait).
   */
  readonly profiles?: AgentProfiles;
  /** The longest wait for an ACTIVE registration's profile, in scheduler ms. Default 30,000. */
  readonly profileWaitMs?: number;
}

/**
 * The agent registry's say on which agents start (`agentEpics({ admission })`,
 * `reactAgentEpics({ admission })`): an agent whose role has a registration (`agent-def/<role>`)
 * starts only while that registration is ACTIVE (and, with `profiles`, once its profile is live);
 * otherwise its lifecycle gets `init_error` naming the registration's state (and why it is
 * paused or failed), and its turns are interrupted with it. A role with no registration is not
 * the registry's to gate: it starts as without a registry.
 */
export function registeredAgentAdmission(options: RegisteredAgentAdmissionOptions = {}): AgentAdmission {
  const { defaultRole, profiles, profileWaitMs = 30_000 } = options;
  if (!(profileWaitMs >= 0)) throw new TypeError(`registeredAgentAdmission: "profileWaitMs" must be >= 0 (ms), got ${String(profileWaitMs)}`);
  return async (role, context) => {
    const name = role ?? defaultRole;
    if (name === undefined) return undefined;
    const registration = await stateOf(context, agentDefinitionStream(name), agentRegistration);
    if (registration === undefined) return undefined;
    if (registration.value === 'ACTIVE') {
      if (profiles === undefined || registration.definition === undefined || profiles.get(name) !== undefined) return undefined;
      const live = await firstValueFrom(
        merge(of(name), profiles.changes$).pipe(
          filter((changed) => changed === name && profiles.get(name) !== undefined),
          map(() => true),
          timeout({ first: profileWaitMs, with: () => of(false), scheduler: context.scheduler }),
        ),
      );
      return live ? undefined : `agent "${name}" is ACTIVE, but its profile was not live within ${profileWaitMs} ms (see its registration)`;
    }
    const why = registration.reason ?? registration.error;
    return `agent "${name}" is ${registration.value}${why === undefined ? '' : ` (${why})`}: new conversations start only on ACTIVE agents`;
  };
}
