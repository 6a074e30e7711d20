import { parseStreamId } from '../../src/reducers/stream-ids.js';
import type { Rune } from '../../src/reducers/rune.js';

const TURN_ENDS = new Set(['turn.completed', 'turn.interrupted', 'turn.error']);

/** A rune that opens or closes an agent's turn, as the log shows it, with the agent it belongs to and the stream of the turn. */
export interface TurnEdge {
  readonly agent: string;
  readonly root: string;
  readonly edge: 'start' | 'end';
  /** The stream the turn runs on: `<agent>/turn`, or `<agent>/react` for a model call of its ReAct loop. */
  readonly stream: string;
}

/**
 * Which agents have a turn open, read from the log alone: a turn of `<root>/agent/<a>/turn` from
 * `turn.started` to its end, or a model call of its ReAct loop `<root>/agent/<a>/react`, which is a
 * turn of the agent's lifecycle `<root>/agent/<a>` (turn id `react-<seq>`) from its `turn.started`
 * to its end (the call's message, if it has text, starts only with its first text).
 */
export class BusyAgents {
  /** Agent (`<root>/agent/<a>`) -> the stream its open turn is on. */
  readonly open = new Map<string, string>();

  /** The edge `rune` is, if it is one. */
  static edgeOf(rune: Rune): TurnEdge | undefined {
    const parts = parseStreamId(rune.stream);
    if (parts === undefined) return undefined;
    const edge = rune.kind === 'turn.started' ? 'start' : TURN_ENDS.has(rune.kind) ? 'end' : undefined;
    if (edge === undefined) return undefined;
    const agent = `${parts.root}/agent/${'agentId' in parts ? parts.agentId : ''}`;
    if (parts.kind === 'turn') return { agent, root: parts.root, edge, stream: rune.stream };
    const turnId = (rune.payload as { turnId?: unknown } | undefined)?.turnId;
    if (parts.kind === 'agent' && typeof turnId === 'string' && turnId.startsWith('react-')) return { agent, root: parts.root, edge, stream: `${agent}/react` };
    return undefined;
  }

  /** Follows one rune; returns the stream of another open turn of the same agent when this one starts beside it. */
  see(rune: Rune): string | undefined {
    const edge = BusyAgents.edgeOf(rune);
    if (edge === undefined) return undefined;
    const open = this.open.get(edge.agent);
    if (edge.edge === 'start') {
      this.open.set(edge.agent, edge.stream);
      return open !== undefined && open !== edge.stream ? open : undefined;
    }
    if (open === edge.stream) this.open.delete(edge.agent);
    return undefined;
  }

  /** How many agents of a conversation have a turn open. */
  busyIn(root: string): number {
    let count = 0;
    for (const agent of this.open.keys()) if (agent.startsWith(`${root}/agent/`)) count++;
    return count;
  }
}
