import type { Rune } from '../../src/reducers/rune.js';
import { turnEdgeOf } from '../../src/reducers/turn-edges.js';

/**
 * Which agents have a turn open, read from the log alone (see `turnEdgeOf`): a turn of
 * `<root>/agent/<a>/turn` from `turn.started` to its end, or a model call of its ReAct loop
 * `<root>/agent/<a>/react`, a turn of the agent's lifecycle (turn id `react-<seq>`).
 */
export class BusyAgents {
  /** Agent (`<root>/agent/<a>`) -> the stream its open turn is on. */
  readonly open = new Map<string, string>();

  /** Follows one rune; returns the stream of another open turn of the same agent when this one starts beside it. */
  see(rune: Rune): string | undefined {
    const edge = turnEdgeOf(rune);
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
