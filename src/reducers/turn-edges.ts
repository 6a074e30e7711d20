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
  /** The stream the turn runs on: `<agent>/turn`, or `<agent>/react` for a model call of its ReAct loop. */
  readonly stream: string;
}

/**
 * The turn edge `rune` is, if it is one, read from the log alone: on an agent's turn stream
 * (`<root>/agent/<a>/turn`) a `turn.started` opens a turn and `turn.completed`,
 * `turn.interrupted` or `turn.error` closes it; a model call of its ReAct loop (`.../react`) is a
 * turn of the agent's lifecycle (`<root>/agent/<a>`, turn id `react-<seq>`), from its
 * `turn.started` to its end (the call's message, if it has text, starts only with its first
 * text). Both kinds count for the same agent, so seed 003's "at most one turn active per agent"
 * holds whichever stream runs it.
 */
export function turnEdgeOf(rune: Rune): TurnEdge | undefined {
  const edge = rune.kind === 'turn.started' ? 'start' : TURN_ENDS.has(rune.kind) ? 'end' : undefined;
  if (edge === undefined) return undefined;
  const parts = parseStreamId(rune.stream);
  if (parts === undefined) return undefined;
  if (parts.kind === 'turn') return { agent: `${parts.root}/agent/${parts.agentId}`, root: parts.root, edge, stream: rune.stream };
  const turnId = (rune.payload as { turnId?: unknown } | undefined)?.turnId;
  if (parts.kind === 'agent' && typeof turnId === 'string' && turnId.startsWith('react-')) {
    const agent = `${parts.root}/agent/${parts.agentId}`;
    return { agent, root: parts.root, edge, stream: `${agent}/react` };
  }
  return undefined;
}
