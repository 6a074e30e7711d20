import { parseStreamId } from '../../src/reducers/stream-ids.js';
import type { Rune } from '../../src/reducers/rune.js';

const TURN_ENDS = new Set(['turn.completed', 'turn.interrupted', 'turn.error']);

/** A rune that opens or closes an agent's turn, as the log shows it, with the agent it belongs to. */
export interface TurnEdge {
  readonly agent: string;
  readonly root: string;
  readonly edge: 'start' | 'end';
}

/**
 * Which agents have a turn open, read from the log alone: a turn of `<root>/agent/<a>/turn` from
 * `turn.started` to its end, or a model call of its ReAct loop `<root>/agent/<a>/react` from
 * `llm-message-started` to `llm-message-completed`.
 */
export class BusyAgents {
  /** Agent (`<root>/agent/<a>`) -> the stream its open turn is on. */
  readonly open = new Map<string, string>();

  /** The edge `rune` is, if it is one. */
  static edgeOf(rune: Rune): TurnEdge | undefined {
    const parts = parseStreamId(rune.stream);
    if (parts === undefined || (parts.kind !== 'turn' && parts.kind !== 'react')) return undefined;
    const agent = `${parts.root}/agent/${parts.agentId}`;
    if ((parts.kind === 'turn' && rune.kind === 'turn.started') || (parts.kind === 'react' && rune.kind === 'llm-message-started'))
      return { agent, root: parts.root, edge: 'start' };
    if ((parts.kind === 'turn' && TURN_ENDS.has(rune.kind)) || (parts.kind === 'react' && rune.kind === 'llm-message-completed'))
      return { agent, root: parts.root, edge: 'end' };
    return undefined;
  }

  /** Follows one rune; returns the stream of another open turn of the same agent when this one starts beside it. */
  see(rune: Rune): string | undefined {
    const edge = BusyAgents.edgeOf(rune);
    if (edge === undefined) return undefined;
    const open = this.open.get(edge.agent);
    if (edge.edge === 'start') {
      this.open.set(edge.agent, rune.stream);
      return open !== undefined && open !== rune.stream ? open : undefined;
    }
    if (open === rune.stream) this.open.delete(edge.agent);
    return undefined;
  }

  /** How many agents of a conversation have a turn open. */
  busyIn(root: string): number {
    let count = 0;
    for (const agent of this.open.keys()) if (agent.startsWith(`${root}/agent/`)) count++;
    return count;
  }
}
