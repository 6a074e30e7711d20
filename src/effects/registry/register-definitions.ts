import { AgentDefinition, agentDefinitionStream } from '../../reducers/agent-registration/definition.js';
import { agentRegistration } from '../../reducers/agent-registration/machine.js';
import type { AgentRegistrationState, AgentRegistrationStateName } from '../../reducers/agent-registration/schema.js';
import type { Engine } from '../../streams/engine.js';
import { canonicalJson } from '../../reducers/canonical-json.js';

/** What {@link registerDefinitions} did with one definition. */
export interface DefinitionRegistration {
  readonly name: string;
  /**
   * - `registered`: it was new: spawned, and now activating.
   * - `unchanged`: registered before with the same content: left as it is.
   * - `redefined`: registered before with other content: `redefine`d, so its checks run again.
   * - `kept`: registered before with other content, but in a state that takes no `redefine`
   *   (ACTIVATING, RETRYING: its checks are running; DECOMMISSIONED: retired for good). See `reason`.
   * - `refused`: the engine refused it (see `reason`).
   */
  readonly outcome: 'registered' | 'unchanged' | 'redefined' | 'kept' | 'refused';
  /** The registration's state name as this left it. */
  readonly state?: AgentRegistrationStateName;
  readonly reason?: string;
}

/**
 * Registers agent definitions (a configuration file's roles, at start), idempotently across
 * restarts: each becomes an `agent-def/<name>` registration stream, spawned with it as input,
 * unless one exists already. One that exists with the same content is left as it is; one with
 * other content is sent `redefine` (its checks run again from ACTIVATING) where its state takes
 * it, else kept as it is, saying why. Never throws for one definition: each gets its outcome.
 */
export async function registerDefinitions(
  engine: Pick<Engine, 'spawn' | 'dispatch' | 'snapshot'>,
  definitions: readonly AgentDefinition[],
): Promise<DefinitionRegistration[]> {
  const outcomes: DefinitionRegistration[] = [];
  for (const given of definitions) {
    const definition = AgentDefinition.parse(given);
    const { name } = definition;
    const stream = agentDefinitionStream(name);
    const existing = (await engine.snapshot<AgentRegistrationState>(stream))?.state;
    if (existing === undefined) {
      // By id: the engine's own agent-registration (the one `runestream serve` narrows to its declared MCP servers).
      const spawned = await engine.spawn(stream, agentRegistration.id, definition);
      outcomes.push(spawned.accepted ? { name, outcome: 'registered', state: 'REGISTERED' } : { name, outcome: 'refused', reason: `${spawned.code}: ${spawned.reason}` });
      continue;
    }
    if (existing.definition !== undefined && canonicalJson(existing.definition) === canonicalJson(definition)) {
      outcomes.push({ name, outcome: 'unchanged', state: existing.value });
      continue;
    }
    const redefined = await engine.dispatch(stream, { type: 'redefine', definition });
    outcomes.push(
      redefined.accepted
        ? { name, outcome: 'redefined', state: 'ACTIVATING' }
        : { name, outcome: 'kept', state: existing.value, reason: `its definition changed, but a registration ${existing.value} is not redefined: ${redefined.reason}` },
    );
  }
  return outcomes;
}
