import { Subject, type Observable } from 'rxjs';
import { toolRegistry, ToolNameClashError, type ToolRegistry } from '../tools/tool-registry.js';
import type { ProfileToolkit } from './agent-profile-builder.js';
import type { AgentProfile } from './agent-profile.js';

/** Options of {@link agentProfiles}. */
export interface AgentProfilesOptions {
  /** The roles known from the start (a configuration's), by name. Default: none. */
  readonly fixed?: Readonly<Record<string, AgentProfile>>;
  /** What the profiles added at runtime are built from; `agentEpics` runs the breakers of each of its chains. Default: none. */
  readonly toolkit?: ProfileToolkit;
  /** Whether agents are offered `delegate`, to hand a task to a fixed role. Default: when there are fixed roles. */
  readonly delegation?: boolean;
}

/**
 * The roles agents may have, each with its profile: the fixed ones, and those added while the
 * engine runs (the agent registry adds an agent definition's while its registration is ACTIVE or
 * PAUSED). Pass it to `agentEpics({ agents })`: an agent's model, tools, scope and budget are
 * looked up here when it needs them. Every role's tools are in one {@link ToolRegistry}, which
 * the tool-call effects run from: a name is one tool.
 */
export interface AgentProfiles {
  readonly fixed: Readonly<Record<string, AgentProfile>>;
  readonly toolkit: ProfileToolkit | undefined;
  readonly delegation: boolean;
  /** Every tool of every role (and `agentEpics`' defaults and `delegate`). */
  readonly tools: ToolRegistry;
  /** The profile of a role now, fixed or added. */
  get(role: string): AgentProfile | undefined;
  /** Every role now. */
  roles(): string[];
  /** The name of a role each time its profile is added or removed. */
  readonly changes$: Observable<string>;
  /** Why `profile` cannot be added for `role` now (the role has one, or a tool's name is another tool's), or `undefined`. */
  clash(role: string, profile: AgentProfile): string | undefined;
  /**
   * Adds a role's profile and its tools; throws {@link ToolNameClashError} if a tool's name is
   * another tool's (an `Error` if the role has a profile). Returns what removes it again, which
   * then calls `close` (stopping its MCP servers).
   */
  add(role: string, profile: AgentProfile, close?: () => Promise<void>): () => void;
  /** Resolves once every `close` of a removed profile has settled (after the engine closed, its MCP servers are stopped). */
  idle(): Promise<void>;
}

/**
 * A set of {@link AgentProfiles}.
 *
 * ## Example
 * ```ts
 * import { agentEpics, agentProfiles, builtinTools, scriptedModel } from 'runestream/agents';
 * const [clock] = builtinTools();
 * const profiles = agentProfiles();
 * const epics = agentEpics({ model: scriptedModel([{ text: 'Hi' }]), agents: profiles });
 * const remove = profiles.add('timekeeper', { tools: [clock!] }); // agents of role "timekeeper" may start now
 * console.log(profiles.roles(), epics.length > 0);
 * // Logs: [ 'timekeeper' ] true
 * remove();
 * ```
 */
export function agentProfiles(options: AgentProfilesOptions = {}): AgentProfiles {
  const { fixed = {}, toolkit } = options;
  const tools = toolRegistry('agentProfiles', []);
  for (const [role, profile] of Object.entries(fixed)) {
    const why = tools.clash(profile.tools ?? []);
    if (why !== undefined) throw new TypeError(`agentProfiles: role "${role}": ${why}`);
    tools.add(profile.tools ?? []);
  }
  const added = new Map<string, AgentProfile>();
  const changes$ = new Subject<string>();
  const closing = new Set<Promise<unknown>>();
  const get = (role: string): AgentProfile | undefined => (Object.hasOwn(fixed, role) ? fixed[role] : added.get(role));
  const toolClash = (role: string, profile: AgentProfile): string | undefined => {
    const why = tools.clash(profile.tools ?? []);
    return why === undefined ? undefined : `agent "${role}": ${why}`;
  };
  const clash = (role: string, profile: AgentProfile): string | undefined => (get(role) === undefined ? toolClash(role, profile) : `role "${role}" has a profile already`);
  return {
    fixed,
    toolkit,
    delegation: options.delegation ?? Object.keys(fixed).length > 0,
    tools,
    get,
    roles: () => [...Object.keys(fixed), ...added.keys()],
    changes$: changes$.asObservable(),
    clash,
    idle: async () => {
      while (closing.size > 0) await Promise.allSettled([...closing]);
    },
    add: (role, profile, close) => {
      if (get(role) !== undefined) throw new Error(`agentProfiles: role "${role}" has a profile already`);
      const why = toolClash(role, profile);
      if (why !== undefined) throw new ToolNameClashError(why);
      tools.add(profile.tools ?? []);
      added.set(role, profile);
      changes$.next(role);
      let removed = false;
      return () => {
        if (removed) return;
        removed = true;
        tools.remove(profile.tools ?? []);
        added.delete(role);
        changes$.next(role);
        if (close === undefined) return;
        const closed = close().catch(() => undefined);
        closing.add(closed);
        void closed.then(() => closing.delete(closed));
      };
    },
  };
}

/** Whether `agents` is an {@link AgentProfiles} rather than a record of profiles. */
export const isAgentProfiles = (agents: unknown): agents is AgentProfiles =>
  typeof agents === 'object' && agents !== null && typeof (agents as AgentProfiles).add === 'function' && typeof (agents as AgentProfiles).get === 'function';
