import { eventTypesOf } from '../event-types.js';
import { defineMachine, type Row } from '../table.js';
import { ConfigName, agentNameOf, type AgentDefinition } from './definition.js';
import { undeclaredMcpServer, type DeclaredMcpServers } from './mcp-servers.js';
import { AgentRegistrationEvent, AgentRegistrationInput, AgentRegistrationState, AgentRegistrationStateName } from './schema.js';

type S = AgentRegistrationState;
type E = AgentRegistrationEvent;

/**
 * The reasons of a pause that the registry made (every provider of the agent's chain has its
 * breaker OPEN) and undoes itself when one lets calls through again; any other pause is an
 * operator's, undone only by a `resume`.
 */
export const AUTO_PAUSE_REASONS = ['rate_limited', 'providers_open'] as const;

/** A new (or changed) definition: checked again from ACTIVATING, its retries counted afresh. */
const redefined = (_: S, e: Extract<E, { type: 'redefine' }>): Partial<S> => ({ definition: e.definition, attempts: undefined, error: undefined, reason: undefined });

/** Seed 002 section 3, edge for edge, and what the registry's effects need besides (extension rows). */
const table: readonly Row<S, E>[] = [
  { from: 'REGISTERED', on: 'register', to: 'ACTIVATING' },
  { from: 'ACTIVATING', on: 'init_succeeded', to: 'ACTIVE' },
  { from: 'ACTIVATING', on: 'init_failed', to: 'ERROR', assign: (_, e) => ({ error: e.error }) },
  { from: 'ACTIVE', on: 'pause', to: 'PAUSED', assign: (_, e) => ({ reason: e.reason }) },
  { from: 'PAUSED', on: 'resume', to: 'ACTIVE', assign: () => ({ reason: undefined }) },
  { from: 'ACTIVE', on: 'remove', to: 'DECOMMISSIONED' },
  { from: 'ERROR', on: 'retry_init', to: 'RETRYING', assign: (s) => ({ attempts: (s.attempts ?? 0) + 1 }) },
  { from: 'RETRYING', on: 'retry_succeeded', to: 'ACTIVE', assign: () => ({ error: undefined, attempts: undefined }) },
  {
    from: 'RETRYING',
    on: 'retry_failed',
    to: 'DECOMMISSIONED',
    assign: (s, e) => ({ error: e.error ?? s.error }),
    source: 'design',
    note: 'the seed\'s "repeated failure": the retry effect sends it once it gives up',
  },
  {
    from: 'RETRYING',
    on: 'init_failed',
    to: 'ERROR',
    assign: (s, e) => ({ error: e.error ?? s.error }),
    source: 'extension',
    note: 'a retry that fails with attempts left: back to ERROR, whose backoff sends the next retry_init',
  },
  {
    from: ['REGISTERED', 'ACTIVE', 'PAUSED', 'ERROR'],
    on: 'redefine',
    to: 'ACTIVATING',
    assign: redefined,
    source: 'extension',
    note: "a changed definition (its configuration file's role edited): its checks run again",
  },
];

/**
 * An agent's registration lifecycle (seed 002): registered, activated, paused and resumed,
 * retried after a failed initialisation, and finally decommissioned (terminal). Spawned with its
 * {@link AgentDefinition} as input (the agent registry's `agent-def/<name>` streams), or without
 * one. It lives only at `agent-def/<name>`, `name` its definition's: a spawn anywhere else is
 * refused with `invalid_stream`.
 *
 * @example
 * ```ts
 * import { agentRegistration } from 'runestream';
 * let s = agentRegistration.initial(undefined);                          // { value: 'REGISTERED' }: no definition
 * s = agentRegistration.transition(s, { type: 'register' });             // ACTIVATING
 * s = agentRegistration.transition(s, { type: 'init_failed', error: 'no API key' });
 * console.log(s);                                                        // Logs: { value: 'ERROR', error: 'no API key' }
 * console.log(agentRegistration.step(s, { type: 'resume' }).accepted);   // Logs: false
 * ```
 */
export const agentRegistration = defineMachine<S, E, AgentRegistrationInput>({
  id: 'agent-registration',
  states: AgentRegistrationStateName.options,
  terminal: ['DECOMMISSIONED'],
  events: eventTypesOf(AgentRegistrationEvent),
  schemas: { state: AgentRegistrationState, event: AgentRegistrationEvent, input: AgentRegistrationInput },
  initial: (definition) => (definition === undefined ? { value: 'REGISTERED' } : { value: 'REGISTERED', definition }),
  table,
  existsReason: (stream) => {
    const name = agentNameOf(stream);
    return name === undefined
      ? `stream "${stream}" already exists`
      : `agent name "${name}" is taken: "${stream}" is registered already (names are not reused, even once removed)`;
  },
  // The registry reads a registration's role from its stream id: it lives only at agent-def/<its name>.
  streamReason: (stream, definition) => {
    const name = agentNameOf(stream);
    if (name === undefined || !ConfigName.safeParse(name).success) return `an agent registration lives only at "agent-def/<name>" (its definition's name), not at "${stream}"`;
    if (definition !== undefined && definition.name !== name)
      return `an agent registration lives only at "agent-def/<name>" of its definition's name: "${stream}" is not "agent-def/${definition.name}"`;
    return undefined;
  },
});

/**
 * {@link agentRegistration} as a server that declares its MCP servers hosts it: the same machine
 * (id, table, states), whose spawn input and `redefine` refuse a definition carrying an MCP server
 * (a command) that `declared` does not declare for its role (`undeclaredMcpServer`):
 * `invalid_input` (or `invalid_event`) naming `mcpServers.<name>`, so nothing is stored and nothing
 * runs. Stored runes are not checked again (hydration applies no schema); the registry's checks and
 * profiles refuse such a stored definition themselves. `runestream serve` hosts this one.
 */
export function declaredAgentRegistration(declared: DeclaredMcpServers): typeof agentRegistration {
  const refuse = (
    definition: AgentDefinition | undefined,
    context: { addIssue(issue: { code: 'custom'; path: string[]; message: string }): void },
    path: readonly string[],
  ): void => {
    const undeclared = definition === undefined ? undefined : undeclaredMcpServer(definition, declared);
    if (undeclared !== undefined) context.addIssue({ code: 'custom', path: [...path, ...undeclared.path], message: undeclared.message });
  };
  const input = AgentRegistrationInput.superRefine((definition, context) => refuse(definition, context, []));
  const event = AgentRegistrationEvent.superRefine((e, context) => {
    if (e.type === 'redefine') refuse(e.definition, context, ['definition']);
  });
  return { ...agentRegistration, schemas: { ...agentRegistration.schemas, input, event } };
}
