import { EMPTY, Observable, filter, map, merge, take } from 'rxjs';
import { AUTO_PAUSE_REASONS, agentRegistration } from '../../reducers/agent-registration/machine.js';
import { exponentialDelay } from '../../reducers/backoff.js';
import type { AgentRegistrationEvent, AgentRegistrationState } from '../../reducers/agent-registration/schema.js';
import { durableDeadline } from '../../streams/durable-deadline.js';
import { stateEffects } from '../../streams/effect-host.js';
import type { Epic, EpicCommand, EpicContext } from '../../streams/epic.js';
import type { EffectsByKey, StreamView } from '../../streams/state-effects.js';
import { errorText } from '../../reducers/error-text.js';
import { agentNameOf } from '../../reducers/agent-registration/definition.js';
import { undeclaredMcpServer, type DeclaredMcpServers } from '../../reducers/agent-registration/mcp-servers.js';
import { buildAgentProfile, type BuiltProfile } from '../agent/agent-profile-builder.js';
import type { AgentProfiles } from '../agent/agent-profiles.js';
import { agentChecks$, type AgentChecksOptions } from './agent-checks.js';
import { chainOpenness$ } from './provider-watch.js';

/** Options of {@link agentRegistry}, with their defaults. */
export interface AgentRegistryOptions extends AgentChecksOptions {
  /** Retries of a failed activation before the agent is DECOMMISSIONED (`retry_failed`). Default 3. */
  readonly maxAttempts?: number;
  /** The delay before the first retry, in ms; each further one doubles it. Default 5,000. */
  readonly retryBaseMs?: number;
  /** The longest delay between retries, in ms. Default 300,000 (5 minutes), or `retryBaseMs` if that is longer. */
  readonly retryMaxMs?: number;
}

type Registration = typeof agentRegistration;
type Output = AgentRegistrationEvent | EpicCommand;

/** How the reason of a pause begins when an ACTIVE registration's profile could not be made live: the operator resumes it (which tries again). */
export const PROFILE_UNAVAILABLE = 'profile unavailable';

/**
 * An ACTIVE (or PAUSED) registration's definition as a live role of `profiles`: built (its MCP
 * servers started) and added on subscribe; removed, its MCP servers stopped, on unsubscribe. A
 * profile that cannot be built or added (an MCP server that does not start, a tool name taken)
 * pauses the registration, saying why.
 */
function liveProfile$(role: string, state: AgentRegistrationState, profiles: AgentProfiles, declared: DeclaredMcpServers): Observable<Output> {
  return new Observable<Output>((subscriber) => {
    let unsubscribed = false;
    let remove: (() => void) | undefined;
    const unavailable = (error: unknown): void => {
      if (!unsubscribed) subscriber.next({ type: 'pause', reason: `${PROFILE_UNAVAILABLE}: ${errorText(error)}`.slice(0, 2000) });
    };
    // A stored definition (an older version's, say) may carry a command the configuration does not declare: it never runs.
    const undeclared = undeclaredMcpServer(state.definition!, declared);
    if (undeclared !== undefined) return void unavailable(undeclared.message);
    buildAgentProfile(state.definition!, profiles.toolkit!).then((built: BuiltProfile) => {
      if (unsubscribed) return void built.close().catch(() => undefined);
      try {
        remove = profiles.add(role, built.profile, built.close);
      } catch (error) {
        void built.close().catch(() => undefined);
        unavailable(error);
      }
    }, unavailable);
    return () => {
      unsubscribed = true;
      remove?.();
    };
  });
}

const isAutoPause = (reason: string | undefined): boolean => (AUTO_PAUSE_REASONS as readonly (string | undefined)[]).includes(reason);

/**
 * The agent registry's effects (seed 002's Agent Lifecycle), for every `agent-registration` stream
 * spawned with a definition (the registry's `agent-def/<name>`; see `agentDefinitionStream`):
 *
 * 1. REGISTERED: it is registered at once (`register`).
 * 2. ACTIVATING: the definition's real checks run (`agentChecks$`: its tools known, its MCP servers
 *    start and their tools' schemas compile, its model answers one tiny call through its chain):
 *    `init_succeeded` -> ACTIVE, or `init_failed{error}` -> ERROR.
 * 3. ERROR: after a backoff (`retryBaseMs`, doubling, at most `retryMaxMs`), `retry_init` ->
 *    RETRYING. The deadline is durable: computed from the rune that entered ERROR, so a restart
 *    re-arms it where it was, or fires it at once if it has passed.
 * 4. RETRYING: the checks again: `retry_succeeded` -> ACTIVE; a failure with attempts left
 *    `init_failed` -> ERROR (and the next backoff); the `maxAttempts`-th failure `retry_failed`
 *    -> DECOMMISSIONED.
 * 5. ACTIVE: with `profiles`, its definition is a live role there (`buildAgentProfile`: model,
 *    built-in, MCP and client tools, system, budget), kept while ACTIVE or PAUSED, removed (its
 *    MCP servers stopped) once it leaves them or the engine closes; one that cannot be built, or
 *    that carries an MCP server `mcpServers` does not declare (a stored definition of an older
 *    version: nothing of it starts), pauses it (reason `profile unavailable: ...`). A configured role's profile is fixed, not
 *    built here. While every provider of its chain has its breaker OPEN, it is paused (`pause` with
 *    reason `rate_limited` when each was opened by a `Retry-After`, else `providers_open`); PAUSED
 *    for one of those reasons, it is resumed as soon as one breaker is not OPEN (HALF_OPEN after
 *    its timeout, or CLOSED). An operator's pause (any other reason) is left to the operator.
 *
 * Everything here is an effect of state (`stateEffects`), so after a restart the engine resumes a
 * check that was running, a retry that was pending and a breaker watch, from the log.
 */
export function agentRegistry(options: AgentRegistryOptions): Epic {
  const { maxAttempts = 3, retryBaseMs = 5000 } = options;
  const { retryMaxMs = Math.max(300_000, retryBaseMs) } = options;
  if (!(Number.isInteger(maxAttempts) && maxAttempts >= 1)) throw new TypeError(`agentRegistry: "maxAttempts" must be an integer >= 1, got ${String(maxAttempts)}`);
  if (!(Number.isFinite(retryBaseMs) && retryBaseMs >= 0)) throw new TypeError(`agentRegistry: "retryBaseMs" must be a finite number >= 0 (ms), got ${String(retryBaseMs)}`);
  const { profiles } = options;
  if (profiles !== undefined && profiles.toolkit === undefined)
    throw new TypeError('agentRegistry: "profiles" must have a toolkit (agentProfiles({ toolkit })) to build profiles from');
  if (!(retryMaxMs >= retryBaseMs)) throw new TypeError(`agentRegistry: "retryMaxMs" must be >= "retryBaseMs" (${retryBaseMs}), got ${String(retryMaxMs)}`);

  // With profiles, the shared MCP servers are its toolkit's unless given: a definition is checked with the servers it is built with.
  const declared: DeclaredMcpServers = { ...options.mcpServers, shared: options.mcpServers?.shared ?? profiles?.toolkit?.mcpServers ?? {} };
  const checkOptions: AgentChecksOptions = { ...options, mcpServers: declared };
  return function agentRegistry(runes$, context, deps) {
    const checks$ = (state: AgentRegistrationState, retrying: boolean): Observable<Output> =>
      agentChecks$(state.definition!, checkOptions, context).pipe(
        map((output): Output => {
          if (output.type === 'command') return output.command;
          const { error } = output;
          if (error === undefined) return { type: retrying ? 'retry_succeeded' : 'init_succeeded' };
          if (retrying && (state.attempts ?? 0) >= maxAttempts) return { type: 'retry_failed', error };
          return { type: 'init_failed', error };
        }),
      );
    const providersOf = (state: AgentRegistrationState): readonly string[] => {
      const chain = Object.hasOwn(options.chains, state.definition!.model) ? options.chains[state.definition!.model] : undefined;
      return chain?.providers.map((provider) => provider.name) ?? [];
    };
    const watch$ = (state: AgentRegistrationState, context: EpicContext, whenAllOpen: boolean): Observable<Output> => {
      const providers = providersOf(state);
      if (providers.length === 0) return EMPTY;
      // A provider's breaker stream may be another process's: watched in all the runes.
      return chainOpenness$(providers, context.allRunes$ ?? runes$, context).pipe(
        filter((openness) => openness.allOpen === whenAllOpen),
        take(1),
        map((openness): Output => (whenAllOpen ? { type: 'pause', reason: openness.rateLimited ? 'rate_limited' : 'providers_open' } : { type: 'resume' })),
      );
    };
    // The same key in ACTIVE and PAUSED: the profile is kept across a pause.
    const live = (stream: string, state: AgentRegistrationState): EffectsByKey<Registration> => {
      const role = agentNameOf(stream);
      if (profiles === undefined || role === undefined || Object.hasOwn(profiles.fixed, role)) return {};
      return { profile: liveProfile$(role, state, profiles, declared) };
    };
    // Each state's effects have keys of their own: a key kept from one state to the next is not started again.
    const effects = (view: StreamView<Registration>, ctx: EpicContext): EffectsByKey<Registration> => {
      const state = view.state;
      if (state?.definition === undefined) return {}; // spawned without a definition: nothing to check
      switch (state.value) {
        case 'REGISTERED':
          return { register: new Observable<Output>((subscriber) => subscriber.next({ type: 'register' })) };
        case 'ACTIVATING':
          return { activation: checks$(state, false) };
        case 'RETRYING':
          return { retryChecks: checks$(state, true) };
        case 'ERROR':
          return {
            retry: durableDeadline(
              // No jitter: the deadline is computed again from the log after a restart and must land where it was.
              view.at + exponentialDelay((state.attempts ?? 0) + 1, retryBaseMs, retryMaxMs),
              { type: 'retry_init' as const },
              { scheduler: ctx.scheduler },
            ),
          };
        case 'ACTIVE':
          return { pauseWhileOpen: watch$(state, ctx, true) };
        case 'PAUSED':
          return isAutoPause(state.reason) ? { resumeWhenOpen: watch$(state, ctx, false) } : {};
        default:
          return {};
      }
    };
    // A live profile is this process's own: every process sharing the log builds it, whoever owns the registration.
    const profileEffects = (view: StreamView<Registration>): EffectsByKey<Registration> => {
      const state = view.state;
      if (state?.definition === undefined) return {};
      if (state.value === 'ACTIVE' || (state.value === 'PAUSED' && !state.reason?.startsWith(PROFILE_UNAVAILABLE))) return live(view.stream, state);
      return {};
    };
    const owned = stateEffects({
      name: 'agentRegistry',
      machine: agentRegistration,
      states: ['REGISTERED', 'ACTIVATING', 'RETRYING', 'ERROR', 'ACTIVE', 'PAUSED'],
      withState: true,
      effects,
    });
    if (profiles === undefined) return owned(runes$, context, deps);
    const everywhere = stateEffects({
      name: 'agentRegistryProfiles',
      machine: agentRegistration,
      states: ['ACTIVE', 'PAUSED'],
      withState: true,
      everyProcess: true,
      effects: profileEffects,
    });
    return merge(owned(runes$, context, deps), everywhere(runes$, context, deps));
  };
}
