import { mergeMap, type OperatorFunction } from 'rxjs';
import { chatActorNotices, type ChatActorNotice } from '../reducers/chat-actor/notices.js';
import type { AnyMachine } from '../reducers/machine.js';
import { machines as builtInMachines } from '../reducers/machines.js';
import { isRuneOf, type Rune } from '../reducers/rune.js';
import { chatActor } from '../reducers/chat-actor/machine.js';

/** A seed-000 notice: `state_changed` or `stopped`, with the seed's JSON data. */
export type StreamNotice = ChatActorNotice;

/** A notice with the stream and the seq of the rune it tells of. */
export type RuneNotice = StreamNotice & { readonly stream: string; readonly seq: number };

const builtIn = builtInMachines as Readonly<Record<string, AnyMachine>>;

/**
 * The notices of one rune. A chat actor's are seed 000's own ({@link chatActorNotices}). Any
 * other finite machine gets the same two events in the same shape: `state_changed` when the
 * state name changes (`reason`: the rune's kind), then `stopped` when it enters one of its
 * machine's terminal states (`partial_response` empty). Spawns, self-loops and data-state
 * machines give none. `machines` says which states are terminal (an engine's `machines`; default:
 * the built-in ones); a machine it does not know gets no `stopped`.
 */
export function streamNotices(rune: Rune, machines: Readonly<Record<string, AnyMachine>> = builtIn): StreamNotice[] {
  if (isRuneOf(chatActor, rune)) return chatActorNotices(rune);
  const { from, to } = rune;
  if (from === undefined || to === undefined || from === to) return [];
  const notices: StreamNotice[] = [{ type: 'state_changed', data: { from_state: from, to_state: to, reason: rune.kind } }];
  if (Object.hasOwn(machines, rune.machine) && machines[rune.machine]!.terminal.includes(to)) {
    notices.push({ type: 'stopped', data: { reason: rune.kind, partial_response: '' } });
  }
  return notices;
}

/**
 * Runes in, seed 000's notices out: each rune becomes its `state_changed` and `stopped` events
 * ({@link streamNotices}), in rune order, each naming its stream and seq. `engine.runes$()`
 * piped through it is the engine's `notices$`, the events a watcher of the sessions is told.
 *
 * @example
 * ```ts
 * import { createEngine, notices } from 'runestream';
 * const engine = createEngine();
 * engine.runes$().pipe(notices()).subscribe((n) => console.log(n.stream, n.type, n.data));
 * await engine.spawn('chat-1', 'chat-actor');
 * await engine.dispatch('chat-1', { type: 'Cancel', reason: 'user_cancelled' });
 * // Logs: chat-1 state_changed { from_state: 'idle', to_state: 'cancelled', reason: 'user_cancelled' }
 * //       chat-1 stopped { reason: 'user_cancelled', partial_response: '' }
 * ```
 */
export function notices(machines?: Readonly<Record<string, AnyMachine>>): OperatorFunction<Rune, RuneNotice> {
  return mergeMap((rune) => streamNotices(rune, machines).map((notice): RuneNotice => ({ stream: rune.stream, seq: rune.seq, ...notice })));
}
