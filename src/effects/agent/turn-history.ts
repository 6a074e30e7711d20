import { defer, map, toArray, type Observable } from 'rxjs';
import type { RuneOf } from '../../reducers/rune.js';
import { turnEngine } from '../../reducers/turn-engine/machine.js';
import type { EpicContext } from '../../streams/epic.js';
import { ofMachine } from '../../streams/of-machine.js';

type TurnRune = RuneOf<typeof turnEngine>;

/** A turn stream's history as read so far: its runes up to `seq`, deltas in a row as one. */
interface History {
  readonly seq: number;
  readonly runes: readonly TurnRune[];
}

/**
 * How many turn streams' histories an engine keeps (the least recently read is dropped first): the
 * agents talking now. One dropped is read whole again the next time, as before there was a cache.
 */
export const KEPT_TURN_HISTORIES = 256;

/** Per engine (its epics' context), the histories it keeps, least recently read first. */
const kept = new WeakMap<EpicContext, Map<string, History>>();

/** `runes` then `fresh` (every seq above `seq`), a delta that follows a delta joined to it. */
function extended(history: History, fresh: readonly TurnRune[]): History {
  const runes = [...history.runes];
  let { seq } = history;
  for (const rune of fresh) {
    if (rune.seq <= seq) continue;
    seq = rune.seq;
    const last = runes.at(-1);
    if (rune.event.type === 'assistant_delta' && last?.event.type === 'assistant_delta') {
      const content = last.event.content + rune.event.content;
      runes[runes.length - 1] = { ...rune, event: { type: 'assistant_delta', content }, payload: { content } } as TurnRune;
    } else runes.push(rune);
  }
  return { seq, runes };
}

/**
 * A turn stream's stored runes, in seq order, with each run of `turn.assistant_delta`s as one
 * rune carrying their text (the seq and time of its last): what a model call's transcript, a
 * turn's start and its tool rounds are read from. Each engine keeps the histories of the
 * {@link KEPT_TURN_HISTORIES} turn streams read last, so a call reads only what was stored since
 * the last read (a model call per round of a long conversation read all of it, from the store,
 * every time: the square of its length, and on SQLite every rune's hash checked again).
 */
export function turnRunes$(stream: string, context: EpicContext): Observable<readonly TurnRune[]> {
  return defer(() => {
    let histories = kept.get(context);
    if (histories === undefined) kept.set(context, (histories = new Map()));
    const before = histories.get(stream) ?? { seq: 0, runes: [] };
    return context.read(stream, before.seq).pipe(
      ofMachine(turnEngine),
      toArray(),
      map((fresh) => {
        // A read that ended meanwhile may have taken the history further: build on the longer.
        const now = histories.get(stream);
        const history = extended(now !== undefined && now.seq > before.seq ? now : before, fresh);
        histories.delete(stream);
        histories.set(stream, history);
        if (histories.size > KEPT_TURN_HISTORIES) histories.delete(histories.keys().next().value!);
        return history.runes;
      }),
    );
  });
}
