import { atRest } from '../../src/reducers/resting-states.js';
import type { Oracle } from './oracle.js';

/** The machines whose every stream must have come to rest: turns, calls, plans, CLI sessions, conversations, agents, chats. */
const JUDGED = new Set(['turn-engine', 'tool-call', 'autonomy-loop', 'agent-manager-session', 'conversation', 'agent-lifecycle', 'chat-actor', 'react-agent']);

/**
 * Liveness: long enough after the last client action (twice the largest configured timeout plus a
 * minute of virtual time), every turn, tool call, plan, CLI session and conversation is terminal or
 * in one of the documented resting states (`restingStates`): nothing is left streaming, executing
 * or planning with nobody working on it.
 */
export const livenessOracle = (): Oracle => ({
  name: 'liveness',
  async final(world) {
    const stuck: string[] = [];
    for (const { stream, machine } of await world.streams()) {
      if (!JUDGED.has(machine)) continue;
      const snapshot = await world.engine.snapshot(stream);
      if (snapshot === undefined) continue;
      if (atRest(machine, snapshot.state) === undefined) stuck.push(`${stream} (${machine}) in ${describe(snapshot.state)}`);
    }
    if (stuck.length === 0) return undefined;
    return {
      oracle: 'liveness',
      message: `not at rest long after the last client action: ${stuck.slice(0, 5).join('; ')}${stuck.length > 5 ? ` and ${stuck.length - 5} more` : ''}`,
      stream: stuck[0]!.split(' ')[0]!,
    };
  },
});

const describe = (state: unknown): string => {
  const value = (state as { value?: unknown }).value;
  return typeof value === 'string' ? `"${value}"` : 'a working state';
};
