import { atRest } from '../../src/reducers/resting-states.js';
import { parseStreamId } from '../../src/reducers/stream-ids.js';
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
    const heads = await world.streams();
    const closed = new Set(heads.filter((head) => head.machine === 'conversation' && (head.value === 'closed' || head.value === 'archived')).map((head) => head.stream));
    for (const { stream, machine } of heads) {
      if (!JUDGED.has(machine)) continue;
      const snapshot = await world.engine.snapshot(stream);
      if (snapshot === undefined) continue;
      if (atRest(machine, snapshot.state) !== undefined) continue;
      const last = (await world.read(stream)).at(-1);
      const root = parseStreamId(stream)?.root;
      const sealed = root !== undefined && root !== stream && closed.has(root) ? `, its conversation ${root} closed` : '';
      stuck.push(`${stream} (${machine}) in ${describe(snapshot.state)} after ${last?.kind ?? 'nothing'}${sealed}`);
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
