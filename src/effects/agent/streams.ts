import { agentStreams, parseStreamId, type AgentStreams } from '../../reducers/stream-ids.js';

/** The agent whose turn stream (`<root>/agent/<a>/turn`) is `stream`, or undefined for any other stream. */
export function agentOfTurn(stream: string): AgentStreams | undefined {
  const parts = parseStreamId(stream);
  return parts?.kind === 'turn' ? agentStreams(parts.root, parts.agentId) : undefined;
}

/** The agent one of whose tool calls (`<root>/agent/<a>/call/<id>`) is `stream`, or undefined. */
export function agentOfCall(stream: string): AgentStreams | undefined {
  const parts = parseStreamId(stream);
  return parts?.kind === 'call' ? agentStreams(parts.root, parts.agentId) : undefined;
}

/** The agent whose ReAct stream (`<root>/agent/<a>/react`) is `stream`, or undefined for any other stream. */
export function agentOfReact(stream: string): AgentStreams | undefined {
  const parts = parseStreamId(stream);
  return parts?.kind === 'react' ? agentStreams(parts.root, parts.agentId) : undefined;
}

/** The agent whose lifecycle stream (`<root>/agent/<a>`) is `stream`, or undefined for any other stream. */
export function agentOfLifecycle(stream: string): AgentStreams | undefined {
  const parts = parseStreamId(stream);
  return parts?.kind === 'agent' ? agentStreams(parts.root, parts.agentId) : undefined;
}
