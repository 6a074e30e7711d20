import { atRest } from '../../src/reducers/resting-states.js';
import { parseStreamId } from '../../src/reducers/stream-ids.js';
import type { Finding, Oracle } from './oracle.js';

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
    const stuck: { stream: string; machine: string; message: string }[] = [];
    const waiting = new Set<string>();
    const heads = await world.streams();
    const closed = new Set(heads.filter((head) => head.machine === 'conversation' && (head.value === 'closed' || head.value === 'archived')).map((head) => head.stream));
    for (const { stream, machine } of heads) {
      if (!JUDGED.has(machine)) continue;
      const snapshot = await world.engine.snapshot(stream);
      if (snapshot === undefined) continue;
      const rest = atRest(machine, snapshot.state);
      if (rest?.rest === 'waiting') waiting.add(stream);
      if (rest !== undefined) continue;
      const last = (await world.read(stream)).at(-1);
      const root = parseStreamId(stream)?.root;
      const sealed = root !== undefined && root !== stream && closed.has(root) ? `, its conversation ${root} closed` : '';
      stuck.push({
        stream,
        machine,
        message: `not at rest long after the last client action: ${stream} (${machine}) in ${describe(snapshot.state)} after ${last?.kind ?? 'nothing'}${sealed}`,
      });
    }
    // What waits on a person, however indirectly, waits too: a call queued behind one awaiting
    // approval, the turn of those calls, its agent, the plan of that agent's task.
    for (let grew = true; grew; ) {
      grew = false;
      for (const each of stuck) {
        if (!waiting.has(each.stream) && dependsOn(each.stream, each.machine, [...waiting])) {
          waiting.add(each.stream);
          grew = true;
        }
      }
    }
    const working = stuck.filter((each) => !waiting.has(each.stream));
    // Each stuck stream once, by its cause: what waits on another stuck stream is not reported apart.
    const workingStreams = working.map((each) => each.stream);
    return working.filter((each) => !dependsOn(each.stream, each.machine, workingStreams)).map(({ stream, message }): Finding => ({ oracle: 'liveness', message, stream }));
  },
});

/**
 * Whether a stream waits on one of `others`: an agent on its turn or ReAct loop; a turn on its
 * agent's tool calls; a tool call on the calls before it (calls that are not parallel-safe run one
 * at a time) and, for a delegation, on its sub-agent (`<agent>.<callId>`); a plan on the agents of
 * its conversation; a chat actor (`<chat>/actor/<n>`) on its chat's agents, whose turn is its interaction.
 */
function dependsOn(stream: string, machine: string, others: readonly string[]): boolean {
  const parts = parseStreamId(stream);
  if (parts === undefined) return false;
  const candidates = others.filter((other) => other !== stream);
  if (machine === 'agent-lifecycle') return candidates.some((other) => other === `${stream}/turn` || other === `${stream}/react`);
  if (machine === 'turn-engine' && parts.kind === 'turn') return candidates.some((other) => other.startsWith(`${parts.root}/agent/${parts.agentId}/call/`));
  if (machine === 'tool-call' && parts.kind === 'call') {
    const agent = `${parts.root}/agent/${parts.agentId}`;
    return candidates.some((other) => other.startsWith(`${agent}/call/`) || other.startsWith(`${agent}.${parts.callId}`));
  }
  if (machine === 'autonomy-loop' || (machine === 'chat-actor' && parts.kind === 'actor')) return candidates.some((other) => other.startsWith(`${parts.root}/agent/`));
  return false;
}

const describe = (state: unknown): string => {
  const value = (state as { value?: unknown }).value;
  return typeof value === 'string' ? `"${value}"` : 'a working state';
};
