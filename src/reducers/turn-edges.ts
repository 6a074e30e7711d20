import type { Rune } from './rune.js';
import { parseStreamId } from './stream-ids.js';

const TURN_ENDS: ReadonlySet<string> = new Set(['turn.completed', 'turn.interrupted', 'turn.error']);

/** A rune that opens or closes a turn of an agent, with the agent it belongs to. */
export interface TurnEdge {
  /** The agent: its lifecycle's stream, `<root>/agent/<a>`. */
  readonly agent: string;
  /** Its conversation (or chat): `<root>`. */
  readonly root: string;
  readonly edge: 'start' | 'end';
}

/**
 * The turn edge `rune` is, if it is one, read from the log alone: on an agent's turn stream
 * (`<root>/agent/<a>/turn`) a `turn.started` opens a turn and `turn.completed`,
 * `turn.interrupted` or `turn.error` closes it; on its ReAct stream (`.../react`) a model call
 * (`llm-message-started` to `llm-message-completed`) is its turn. Both kinds count for the same
 * agent, so seed 003's "at most one turn active per agent" holds whichever stream runs it.
 */
export function turnEdgeOf(rune: Rune): TurnEdge | undefined {
  const parts = parseStreamId(rune.stream);
  if (parts === undefined || (parts.kind !== 'turn' && parts.kind !== 'react')) return undefined;
  const agent = `${parts.root}/agent/${parts.agentId}`;
  if ((parts.kind === 'turn' && rune.kind === 'turn.started') || (parts.kind === 'react' && rune.kind === 'llm-message-started'))
    return { agent, root: parts.root, edge: 'start' };
  if ((parts.kind === 'turn' && TURN_ENDS.has(rune.kind)) || (parts.kind === 'react' && rune.kind === 'llm-message-completed'))
    return { agent, root: parts.root, edge: 'end' };
  return undefined;
}
