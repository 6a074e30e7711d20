/**
 * The streams of one agent, all named after its id. The turn stream is the agent's entry point:
 * spawning `<id>/turn` (machine `turn-engine`) creates the agent, and `start_turn` sends it a message.
 */
export interface AgentStreams {
  /** The agent's `turnEngine`: its turns, deltas and tool rounds. */
  readonly turn: string;
  /** The agent's `conversation` (seed 003 session lifecycle). */
  readonly conversation: string;
  /** The agent's `agentLifecycle`. */
  readonly lifecycle: string;
  /** The `toolCall` stream of one of its calls. */
  call(callId: string): string;
}

const TURN = '/turn';

/** The stream ids of agent `id`. */
export function agentStreams(id: string): AgentStreams {
  return {
    turn: `${id}${TURN}`,
    conversation: `${id}/conversation`,
    lifecycle: `${id}/agent`,
    call: (callId) => `${id}/call/${callId}`,
  };
}

/** The agent a turn stream belongs to, or undefined for a stream that is not an agent's turn stream. */
export function agentOfTurn(stream: string): string | undefined {
  return stream.endsWith(TURN) && stream.length > TURN.length ? stream.slice(0, -TURN.length) : undefined;
}

/** The agent a tool-call stream belongs to (`<id>/call/<callId>`), or undefined. */
export function agentOfCall(stream: string): string | undefined {
  const at = stream.lastIndexOf('/call/');
  return at > 0 ? stream.slice(0, at) : undefined;
}
