import { EMPTY, Observable, defer, filter, from, map, merge, mergeMap, of, take, takeWhile, type ObservableInput } from 'rxjs';
import { chatActor } from '../reducers/chat-actor/machine.js';
import type { ChatActorEvent, ChatActorState } from '../reducers/chat-actor/schema.js';
import { isRuneOf, type Rune, type RuneOf } from '../reducers/rune.js';
import { agentStreams, chatActorStream, chatStream, isSegment, parseStreamId, type AgentStreams } from '../reducers/stream-ids.js';
import { turnEndingOf, turnEngine } from '../reducers/turn-engine/machine.js';
import { stateEffects } from '../streams/effect-host.js';
import type { DispatchOptions, Engine } from '../streams/engine.js';
import type { Epic, EpicCommand, EpicContext } from '../streams/epic.js';
import type { EffectsByKey } from '../streams/state-effects.js';

/** Options of {@link chatTalk}. */
export interface ChatTalkOptions {
  /** The id of the agent that answers in every chat: its turns are `chat/<c>/agent/<id>/turn`. Default `"assistant"`. */
  readonly agentId?: string;
}

type ActorRune = RuneOf<typeof chatActor>;
type TurnRune = RuneOf<typeof turnEngine>;

/** The turn states in which there is work to interrupt. */
const BUSY = new Set(['streaming', 'tool_executing']);

/** The chat agent of a chat actor's stream (`chat/<c>/actor/<n>`), or undefined for any other stream. */
export const chatAgentOfActor = (stream: string, agentId: string): AgentStreams | undefined => {
  const parts = parseStreamId(stream);
  return parts?.kind === 'actor' ? agentStreams(parts.root, agentId) : undefined;
};

/** What one turn's end means for the interaction that started it; `undefined`: a steer goes on in the next turn. */
function outcome(rune: TurnRune): ChatActorEvent | undefined {
  const ending = turnEndingOf(rune);
  if (ending === 'completed') return { type: 'InteractionComplete', success: true };
  if (ending === 'error') return { type: 'InteractionComplete', success: false, error: 'error' in rune.event ? String(rune.event.error) : 'the turn failed' };
  if (rune.event.type === 'steer') return undefined;
  const reason = rune.event.type === 'interrupt' && rune.event.reason !== undefined ? rune.event.reason : 'interrupted';
  return { type: 'InteractionComplete', success: false, error: `the turn was interrupted: ${reason}` };
}

/**
 * The interaction of an actor that just entered `running` with a message: the chat's agent gets
 * it as a turn (its turn stream is spawned first if the chat has none yet), and the turn's end
 * becomes the actor's `InteractionComplete`. Listens for the end before starting the turn, so it
 * cannot miss it; a busy agent fails the interaction at once rather than queue it unseen.
 */
function interaction(actor: string, agent: AgentStreams, message: string, runes$: Observable<Rune>, context: EpicContext): Observable<EpicCommand> {
  return defer(() => context.snapshot(agent.turn, turnEngine)).pipe(
    mergeMap((turn): ObservableInput<EpicCommand> => {
      if (turn !== undefined && turn.state.value !== 'idle') {
        return of({ stream: actor, event: { type: 'InteractionComplete', success: false, error: `the chat's agent is busy (its turn is ${turn.state.value})` } });
      }
      const ended$ = runes$.pipe(
        filter((rune): rune is TurnRune => rune.stream === agent.turn && isRuneOf(turnEngine, rune) && turnEndingOf(rune) !== undefined),
        map(outcome),
        filter((event) => event !== undefined),
        take(1),
        map((event): EpicCommand => ({ stream: actor, event })),
      );
      const start: EpicCommand[] = [
        ...(turn === undefined ? [{ stream: agent.turn, spawn: turnEngine.id, input: { agentId: agent.agentId } }] : []),
        { stream: agent.turn, event: { type: 'start_turn', input: message } },
      ];
      return merge(ended$, from(start));
    }),
  );
}

/**
 * A chat actor that talks (seed 000 driven by seed 003's turns): every chat `chat/<c>` has an agent
 * (`chat/<c>/agent/<agentId>`, run by `agentEpics`) and a line of actors (`chat/<c>/actor/<n>`).
 *
 * 1. An actor enters `running` with a `ProcessInteraction {userId, message}`: the agent gets the
 *    message as a turn, and the turn's end is the actor's `InteractionComplete` (`success: true`
 *    when the turn completed; `false` with the error when it failed or was interrupted). The
 *    agent's turn stream holds the chat's whole history, so every actor of the chat answers with
 *    all of it in view.
 * 2. `Pause`, `Cancel` or `Error` while running: the turn is interrupted at its next safe boundary
 *    (the model call is aborted, open tool calls end cancelled) with the actor's reason.
 * 3. A paused actor resumed by a `ProcessInteraction` with a message (seed 000: paused -> idle)
 *    then processes that message: the epic dispatches it again, now from `idle`.
 *
 * After a restart an actor found `running` is paused by `chatActorLifecycle` ("interrupted by
 * restart"), and this epic interrupts its turn if the turn is not already over: a chat actor and
 * its turn never disagree. The next interaction resumes the actor (point 3). A chat whose last
 * actor ended goes on with a fresh actor: see `sendChatMessage`.
 */
export function chatTalk(options: ChatTalkOptions = {}): Epic {
  const agentId = options.agentId ?? 'assistant';
  if (!isSegment(agentId)) throw new TypeError(`chatTalk: "agentId" must be 1 to 128 characters with no "/", got ${JSON.stringify(agentId)}`);
  return function chatTalk(runes$, context, deps) {
    const interactions = stateEffects({
      name: 'chatTalk',
      machine: chatActor,
      states: ['running'],
      effects: (view): EffectsByKey<typeof chatActor> => {
        const agent = chatAgentOfActor(view.stream, agentId);
        const rune = view.rune;
        // Resumed: the interaction died with the old process; chatActorLifecycle pauses the actor.
        if (agent === undefined || view.origin !== 'live' || rune?.event.type !== 'ProcessInteraction' || rune.event.message === undefined) return {};
        return { [`interaction:${rune.seq}`]: interaction(view.stream, agent, rune.event.message, runes$, context) };
      },
    });

    const onActorRune = (rune: ActorRune, agent: AgentStreams): Observable<EpicCommand> => {
      const { event } = rune;
      if (rune.from === 'paused' && rune.to === 'idle' && event.type === 'ProcessInteraction' && event.message !== undefined) {
        return of({ stream: rune.stream, event });
      }
      if (rune.from !== 'running' || rune.to === 'running' || rune.to === 'idle') return EMPTY;
      const reason =
        event.type === 'Pause' ? (event.reason ?? 'paused') : event.type === 'Cancel' ? event.reason : event.type === 'Error' ? event.error : `the actor is ${rune.to}`;
      return defer(() => context.snapshot(agent.turn, turnEngine)).pipe(
        takeWhile((turn) => turn !== undefined && BUSY.has(turn.state.value)),
        map((): EpicCommand => ({ stream: agent.turn, event: { type: 'interrupt', reason } })),
      );
    };
    const stops$ = runes$.pipe(
      mergeMap((rune) => {
        const agent = isRuneOf(chatActor, rune) ? chatAgentOfActor(rune.stream, agentId) : undefined;
        return agent === undefined ? EMPTY : onActorRune(rune as ActorRune, agent);
      }),
    );
    return merge(interactions(runes$, context, deps), stops$);
  };
}

/** Options of {@link sendChatMessage}. */
export interface ChatMessage {
  readonly userId: string;
  readonly message: string;
}

/** Where {@link sendChatMessage} put a message: the actor it went to, and the engine's answer. */
export interface SentChatMessage {
  readonly actor: string;
  readonly accepted: boolean;
  readonly code?: string;
  readonly reason?: string;
}

/** The chat's newest actor number (0: none yet), in O(log n) snapshots: actors are numbered 1, 2, ... without gaps. */
async function newestActor(engine: Pick<Engine, 'snapshot'>, chatId: string): Promise<number> {
  const exists = async (n: number): Promise<boolean> => (await engine.snapshot(chatActorStream(chatId, n))) !== undefined;
  if (!(await exists(1))) return 0;
  let low = 1;
  let high = 2;
  while (await exists(high)) {
    low = high;
    high *= 2;
  }
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (await exists(mid)) low = mid;
    else high = mid;
  }
  return low;
}

/**
 * Sends a user's message to chat `chatId` (seed 000 "Respawning"): to its newest actor if that one
 * has not ended, else to a fresh actor spawned for it (`chat/<c>/actor/<n+1>`), which answers
 * with the chat's whole history, since the history is the chat agent's turn stream. So a chat can
 * go on for months while each actor's lifecycle stays the seed's. Resolves with the actor and
 * whether it took the message (a running actor refuses a second one: `not_allowed`). `options`
 * are those of the spawn and the dispatch (the client's `origin`).
 */
export async function sendChatMessage(
  engine: Pick<Engine, 'snapshot' | 'spawn' | 'dispatch'>,
  chatId: string,
  { userId, message }: ChatMessage,
  options?: DispatchOptions,
): Promise<SentChatMessage> {
  chatStream(chatId); // throws for an id that is not a segment
  let n = await newestActor(engine, chatId);
  const newest = n === 0 ? undefined : await engine.snapshot<ChatActorState>(chatActorStream(chatId, n));
  if (newest === undefined || chatActor.terminal.includes(newest.state.value)) {
    n++;
    await engine.spawn(chatActorStream(chatId, n), chatActor.id, undefined, options);
  }
  const actor = chatActorStream(chatId, n);
  const result = await engine.dispatch(actor, { type: 'ProcessInteraction', userId, message }, options);
  return result.accepted ? { actor, accepted: true } : { actor, accepted: false, code: result.code, reason: result.reason };
}
