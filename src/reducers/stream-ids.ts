import { isStorableText, storableText } from './value-limits.js';
/**
 * The one scheme of stream ids for agents, rooted in their conversation, so that sealing,
 * archival, authorization and AG-UI can all tell from an id alone which conversation a stream
 * belongs to (its root) and what it is:
 *
 * | stream | machine | what |
 * |---|---|---|
 * | `conv/<c>` | `conversation` | a conversation of agents (seed 003) |
 * | `chat/<c>` | `conversation` | a chat (seed 000): a conversation driven by chat actors |
 * | `chat/<c>/actor/<n>` | `chat-actor` | the chat's n-th actor (a fresh one after one ends) |
 * | `<root>/agent/<a>` | `agent-lifecycle` | agent `a` of the conversation |
 * | `<root>/agent/<a>/turn` | `turn-engine` | its turns |
 * | `<root>/agent/<a>/react` | `react-agent` | a ReAct agent's loop (seed 004), in place of `turn` |
 * | `<root>/agent/<a>/call/<id>` | `tool-call` | one of its tool calls |
 * | `conv/<c>/plan/<p>` | `autonomy-loop` | plan `p`: a goal the conversation's agents work on (seed 003) |
 *
 * Each segment (`c`, `a`, a call id) is 1 to {@link MAX_SEGMENT} characters with no `/`; ids a
 * model makes up (call ids) are made to fit with {@link toSegment}.
 */

/** The longest segment of a stream id (a conversation, agent or call id). */
export const MAX_SEGMENT = 128;

/** The kinds of root: a conversation of agents, or a chat (seed 000) whose actors drive one. */
export type RootKind = 'conv' | 'chat';

/** What a stream id of this scheme names. */
export type StreamIdParts =
  | { readonly kind: 'conversation'; readonly root: string; readonly rootKind: RootKind; readonly id: string }
  | { readonly kind: 'actor'; readonly root: string; readonly rootKind: 'chat'; readonly id: string; readonly actor: number }
  | { readonly kind: 'agent' | 'turn' | 'react'; readonly root: string; readonly rootKind: RootKind; readonly id: string; readonly agentId: string }
  | { readonly kind: 'call'; readonly root: string; readonly rootKind: RootKind; readonly id: string; readonly agentId: string; readonly callId: string }
  | { readonly kind: 'plan'; readonly root: string; readonly rootKind: 'conv'; readonly id: string; readonly planId: string };

/** Whether `segment` can be one segment of a stream id: 1 to {@link MAX_SEGMENT} characters, no `/`, and storable (no NUL, no lone surrogate). */
export const isSegment = (segment: unknown): segment is string =>
  typeof segment === 'string' && segment.length > 0 && segment.length <= MAX_SEGMENT && !segment.includes('/') && isStorableText(segment);

const segment = (what: string, value: string): string => {
  if (!isSegment(value)) throw new TypeError(`${what} must be 1 to ${MAX_SEGMENT} characters with no "/", NUL or lone surrogate, got ${JSON.stringify(value)}`);
  return value;
};

/**
 * An id made up elsewhere (a model's call id) as a segment: `/` becomes `_`, cut to
 * {@link MAX_SEGMENT}; empty becomes `_`; a NUL or a lone surrogate (one the cut made too) becomes
 * U+FFFD, so the stream id is one every store keeps.
 */
export const toSegment = (id: string): string => storableText(id.replaceAll('/', '_').slice(0, MAX_SEGMENT)) || '_';

/** The stream of conversation `id`: `conv/<id>`. */
export const conversationStream = (id: string): string => `conv/${segment('a conversation id', id)}`;

/** The stream of chat `id` (its conversation): `chat/<id>`. */
export const chatStream = (id: string): string => `chat/${segment('a chat id', id)}`;

/** The `n`-th actor of chat `id` (1, 2, ...): `chat/<id>/actor/<n>`. */
export const chatActorStream = (id: string, n: number): string => {
  if (!Number.isSafeInteger(n) || n < 1) throw new TypeError(`an actor number must be a positive integer, got ${String(n)}`);
  return `${chatStream(id)}/actor/${n}`;
};

/** The autonomy loop of plan `planId` in conversation `conversationId`: `conv/<c>/plan/<p>`. */
export const planStream = (conversationId: string, planId: string): string => `${conversationStream(conversationId)}/plan/${segment('a plan id', planId)}`;

/** The streams of agent `agentId` in the conversation (or chat) whose stream is `root`. */
export interface AgentStreams {
  /** The conversation's stream (`conv/<c>` or `chat/<c>`). */
  readonly root: string;
  readonly agentId: string;
  /** Its `agentLifecycle`. */
  readonly lifecycle: string;
  /** Its `turnEngine`: its turns, deltas and tool rounds. */
  readonly turn: string;
  /** Its `reactAgent` (seed 004), for an agent of that kind. */
  readonly react: string;
  /** The `toolCall` stream of one of its calls. */
  call(callId: string): string;
}

/** The streams of agent `agentId` under `root` (a conversation's or a chat's stream). */
export function agentStreams(root: string, agentId: string): AgentStreams {
  const parts = parseStreamId(root);
  if (parts?.kind !== 'conversation') throw new TypeError(`an agent's root must be a conversation stream (conv/<c> or chat/<c>), got ${JSON.stringify(root)}`);
  const lifecycle = `${root}/agent/${segment('an agent id', agentId)}`;
  return { root, agentId, lifecycle, turn: `${lifecycle}/turn`, react: `${lifecycle}/react`, call: (callId) => `${lifecycle}/call/${segment('a call id', callId)}` };
}

/**
 * What `stream` names in this scheme, or `undefined` for a stream outside it (any other id is
 * still a valid stream; it is just not an agent's).
 */
export function parseStreamId(stream: string): StreamIdParts | undefined {
  const parts = stream.split('/');
  const [rootKind, id] = parts;
  if ((rootKind !== 'conv' && rootKind !== 'chat') || !isSegment(id) || parts.some((p) => p.length === 0 || p.length > MAX_SEGMENT)) return undefined;
  const root = `${rootKind}/${id}`;
  if (parts.length === 2) return { kind: 'conversation', root, rootKind, id };
  if (parts[2] === 'actor' && parts.length === 4 && rootKind === 'chat') {
    const actor = Number(parts[3]);
    return /^[1-9]\d*$/.test(parts[3]!) && Number.isSafeInteger(actor) ? { kind: 'actor', root, rootKind, id, actor } : undefined;
  }
  if (parts[2] === 'plan') return parts.length === 4 && rootKind === 'conv' ? { kind: 'plan', root, rootKind, id, planId: parts[3]! } : undefined;
  if (parts[2] !== 'agent' || parts.length < 4) return undefined;
  const agentId = parts[3]!;
  if (parts.length === 4) return { kind: 'agent', root, rootKind, id, agentId };
  if (parts.length === 5 && (parts[4] === 'turn' || parts[4] === 'react')) return { kind: parts[4], root, rootKind, id, agentId };
  if (parts.length === 6 && parts[4] === 'call') return { kind: 'call', root, rootKind, id, agentId, callId: parts[5]! };
  return undefined;
}

/** The conversation (or chat) stream `stream` belongs to, or `undefined` outside the scheme. */
export const rootOf = (stream: string): string | undefined => parseStreamId(stream)?.root;

/** The agent streams a machine of this scheme must live at (see {@link agentLayoutReason}). */
export type AgentStreamKind = 'agent' | 'turn' | 'react';

/**
 * Why `stream` is not an agent's stream of `kind` (`<root>/agent/<a>`, or `.../turn`, `.../react`),
 * or `undefined` when it is: the reason an instance of `machine` there is refused, since the agent
 * epics find an agent only by these ids, so one elsewhere would wait for ever.
 */
export function agentLayoutReason(machine: string, stream: string, kind: AgentStreamKind): string | undefined {
  if (parseStreamId(stream)?.kind === kind) return undefined;
  const layout = kind === 'agent' ? '<root>/agent/<a>' : `<root>/agent/<a>/${kind}`;
  return `a "${machine}" lives only at "${layout}" (<root> is conv/<c> or chat/<c>; see agentStreams), not at "${stream}": no agent runs it elsewhere`;
}

/**
 * The same agent's stream of the other kind, for an agent's turn stream (its ReAct stream) or
 * ReAct stream (its turn stream), else `undefined`: an agent id has one kind, so the two never
 * both exist (the engine refuses the second with `agent_kind_conflict`).
 */
export function otherAgentKindOf(stream: string): string | undefined {
  const parts = parseStreamId(stream);
  if (parts?.kind !== 'turn' && parts?.kind !== 'react') return undefined;
  const agent = agentStreams(parts.root, parts.agentId);
  return parts.kind === 'turn' ? agent.react : agent.turn;
}
